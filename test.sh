#!/usr/bin/env bash
# Runs every test: the Rust workspace (server and SDK), the Python SDK, the
# PHP SDK and the cross-language conformance suite. Each suite starts its own
# redis-server on a free loopback port (never 6379) and stops it afterwards.
# Installs missing prerequisites first (tools/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")"

tools/install-deps.sh

echo "== Rust: server and SDK"
cargo test --workspace --locked -- --test-threads 2

echo "== Python SDK"
.venv/bin/mypy --strict sdk-python/src
.venv/bin/pytest -q sdk-python/tests
echo "== Python SDK on the oldest redis-py it allows"
.venv-redis-oldest/bin/pytest -q sdk-python/tests

echo "== PHP SDK"
(cd sdk-php && composer validate --strict --no-check-publish -q && composer dump-autoload -q)
phpunit -c sdk-php/phpunit.xml

echo "== Conformance: every SDK pair through the real server"
cargo build -q --locked -p delayer-server -p delayer-conformance-driver
.venv/bin/pytest -q conformance
echo "== Conformance on the per-topic layout (layout = topic): every SDK pair and operation, sentinel mode"
CONFORMANCE_LAYOUT=topic .venv/bin/pytest -q conformance/test_conformance_matrix.py conformance/test_conformance_reliable.py \
  conformance/test_conformance_topic_layout.py conformance/test_conformance_sentinel.py \
  conformance/test_conformance_contract.py conformance/test_conformance_rejections.py \
  conformance/test_conformance_odd_names.py conformance/test_conformance_repush.py \
  conformance/test_conformance_inspect.py conformance/test_conformance_rounding.py

echo "== HTTP API and dashboard: the real server, headless Chromium"
.venv/bin/pytest -q -p no:cacheprovider server/tests/http
tools/check-packaging.sh   # crates, wheel and sdist, composer package: built and installed
