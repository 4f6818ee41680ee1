#!/usr/bin/env bash
# Delayer's benchmarks in one command: builds the release server and the
# bench binary, installs BullMQ for the comparison rows (npm ci in
# bench/bullmq, once), then runs every benchmark against a redis-server of
# its own on a free loopback port. Options go to the bench binary (--help
# lists them); --quick is a ~1 minute smoke test. See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p delayer-server -p delayer-bench >&2
# BullMQ, pinned by bench/bullmq/package-lock.json. Without node or npm, or if
# the install fails, the BullMQ rows say "skipped" and the rest still runs.
if [[ ! -d bench/bullmq/node_modules ]] && command -v npm >/dev/null && command -v node >/dev/null; then
    echo "bench/run.sh: npm ci in bench/bullmq (BullMQ, for the comparison rows)" >&2
    (cd bench/bullmq && npm ci --ignore-scripts --no-audit --no-fund >&2) ||
        echo "bench/run.sh: npm ci failed; the BullMQ rows will say skipped" >&2
fi
BENCH_COMMAND="bench/run.sh${*:+ $*}" exec target/release/delayer-bench "$@"
