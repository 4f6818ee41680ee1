#!/usr/bin/env bash
# Installs what the tests and the demo need, when it is missing: redis-server,
# OpenSSL (headers for the build, the CLI for TLS tests), PHP with phpredis,
# PHPUnit and Composer (Debian packages), and a Python
# virtual environment with the Python SDK and its dev tools (pip).
# Idempotent: a machine that has everything is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null || need+=(redis-server)
# The Rust build links the system OpenSSL (the server's webhooks: TLS via native-tls).
pkg-config --exists openssl 2>/dev/null || need+=(libssl-dev pkg-config)
if [ "${1:-}" != "--redis-only" ]; then
  command -v openssl >/dev/null || need+=(openssl)   # TLS tests make their certificates
  command -v php >/dev/null || need+=(php-cli)
  php -m 2>/dev/null | grep -qx redis || need+=(php-redis)
  command -v phpunit >/dev/null || need+=(phpunit)
  command -v composer >/dev/null || need+=(composer)
  python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
  # The dashboard's browser test (server/tests/http/test_dashboard.py).
  command -v chromium >/dev/null || need+=(chromium)
  command -v chromedriver >/dev/null || need+=(chromium-driver)
  command -v node >/dev/null || need+=(nodejs)   # runs docs/webhook-verify/verify.js in the webhook test
  command -v promtool >/dev/null || need+=(prometheus)   # promtool checks and tests deploy/prometheus/alerts.yml
  # The container test (deploy/tests): podman builds and runs the image
  # (with runc: crun refuses a cgroups v1 hybrid machine).
  command -v podman >/dev/null || need+=(podman)
  command -v runc >/dev/null || need+=(runc)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing: ${need[*]}; run: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ "${1:-}" != "--redis-only" ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  .venv/bin/pip install -q --disable-pip-version-check -e 'sdk-python[dev]'
  # Selenium drives Debian's Chromium in the dashboard's browser test.
  .venv/bin/python -c 'import selenium' 2>/dev/null || .venv/bin/pip install -q --disable-pip-version-check 'selenium>=4.11'
  # deploy/tests/test_compose.py reads deploy/compose.yaml.
  .venv/bin/python -c 'import yaml' 2>/dev/null || .venv/bin/pip install -q --disable-pip-version-check 'pyyaml>=6'
fi
