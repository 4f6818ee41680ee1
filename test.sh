#!/usr/bin/env bash
# Runs every test: the Rust workspace (server and SDK), the Python SDK, the
# PHP SDK and the cross-language conformance suite. Each suite starts its own
# redis-server on a free loopback port (never 6379) and stops it afterwards.
# Installs missing prerequisites first (tools/install-deps.sh).
# Prints how long each section took, and all of them at the end, so that a CI
# log shows where the time goes.
set -euo pipefail
cd "$(dirname "$0")"

section_name=
section_start=$SECONDS
times=
# Closes the running section (prints its time) and opens the next, if named.
section() {
  if [ -n "$section_name" ]; then
    local took=$((SECONDS - section_start))
    echo "(took ${took} s: $section_name)"
    times+=$(printf '%6d s  %s' "$took" "$section_name")$'\n'
  fi
  section_name=${1:-}
  section_start=$SECONDS
  if [ -n "$section_name" ]; then echo "== $section_name"; fi
}

section "Prerequisites (tools/install-deps.sh)"
tools/install-deps.sh

section "Rust: server and SDK"
cargo test --workspace --locked -- --test-threads 2
# The sync Worker's SIGTERM without tokio: the SDK built without `aio`.
cargo test --locked -p delayer --no-default-features --test worker_sigterm
# The at-least-once chaos (kill -9 of workers and servers, Redis crashed) on the per-topic layout too.
CHAOS_LAYOUT=topic cargo test --locked -p delayer-server --test chaos
section "Server: the mover core without HTTP (no axum, reqwest or hmac without the http and webhook features)"
if cargo tree --locked -p delayer-server --no-default-features -e normal | grep -E 'axum|reqwest|hmac'; then
  echo "the server built without http and webhook depends on the crates above" >&2
  exit 1
fi
cargo check --locked -q -p delayer-server --no-default-features
section "Rust SDK: the opentelemetry feature (trace context into consumer spans)"
cargo test --locked -p delayer --features opentelemetry --test trace --test trace_otel

# The SDK's tests run in tools/check-packaging.sh, against the built wheel:
# the oldest Python with the oldest redis-py, the newest with the newest.
section "Python SDK: mypy --strict"
.venv/bin/mypy --strict sdk-python/src

section "PHP SDK"
(cd sdk-php && composer validate --strict --no-check-publish -q && composer dump-autoload -q)
phpunit -c sdk-php/phpunit.xml

section "Conformance: build the server and the Rust driver"
cargo build -q --locked -p delayer-server -p delayer-conformance-driver
section "Conformance: every SDK pair through the real server"
.venv/bin/pytest -q conformance
section "Conformance on the per-topic layout (layout = topic): every SDK pair and operation, sentinel mode"
CONFORMANCE_LAYOUT=topic .venv/bin/pytest -q conformance/test_conformance_matrix.py conformance/test_conformance_reliable.py \
  conformance/test_conformance_topic_layout.py conformance/test_conformance_sentinel.py \
  conformance/test_conformance_contract.py conformance/test_conformance_rejections.py \
  conformance/test_conformance_odd_names.py conformance/test_conformance_repush.py \
  conformance/test_conformance_inspect.py conformance/test_conformance_rounding.py \
  conformance/test_conformance_undecodable.py conformance/test_conformance_outcomes.py \
  conformance/test_conformance_worker.py conformance/test_conformance_flow.py \
  conformance/test_conformance_limit.py

section "HTTP API and dashboard: the real server, headless Chromium"
.venv/bin/pytest -q -p no:cacheprovider server/tests/http

section "Alerts and Grafana: promtool checks and tests the rules; both name only metrics a live server exports"
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
.venv/bin/pytest -q -p no:cacheprovider deploy/tests/test_grafana.py

section "Container: the image's layout with podman, compose.yaml and prometheus.yml checked (deploy/tests)"
.venv/bin/pytest -q -p no:cacheprovider deploy/tests/test_container.py deploy/tests/test_compose.py

section "Packaging (tools/check-packaging.sh), with the Python SDK's tests against the wheel"
tools/check-packaging.sh   # crates, wheel and sdist, composer package: built and installed
section
printf '== time per section\n%s%6d s  all\n' "$times" "$SECONDS"
