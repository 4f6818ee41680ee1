#!/usr/bin/env bash
# Delayer's benchmarks in one command: builds the release server and the
# bench binary, then runs every benchmark against a redis-server of its own
# on a free loopback port. Options go to the bench binary (--help lists them);
# --quick is a ~1 minute smoke test. See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p delayer-server -p delayer-bench >&2
BENCH_COMMAND="bench/run.sh${*:+ $*}" exec target/release/delayer-bench "$@"
