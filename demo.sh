#!/usr/bin/env bash
# Quick start: brings up Redis (installs redis-server if missing and starts
# one on 127.0.0.1:6379 unless one answers there), runs the delayer server
# with the sample delayer.conf, pushes a demo job due in 2 s and consumes it.
# Stops what it started when done.
set -euo pipefail
cd "$(dirname "$0")"

tools/install-deps.sh --redis-only
started_redis=""
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting redis-server on 127.0.0.1:6379"
  redis-server --bind 127.0.0.1 --port 6379 --save "" --daemonize yes --pidfile /tmp/delayer-demo-redis.pid >/dev/null
  started_redis=1
  for _ in $(seq 100); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.05; done
fi

cargo build --release --quiet --bin delayer --example quickstart
./target/release/delayer -c delayer.conf &
server=$!
cleanup() {
  kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  if [ -n "$started_redis" ]; then redis-cli -p 6379 shutdown nosave >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

./target/release/examples/quickstart delayer.conf
echo "server log: logs/access.log, logs/error.log"
