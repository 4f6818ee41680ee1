#!/usr/bin/env bash
# Checks that every package installs the way its ecosystem installs it, so a
# release is not the first time anyone tries:
#  - Rust: `cargo package` (with its verification build) of the SDK crate
#    `delayer`, the server crate `delayer-server` and `delayer-protocol`,
#    which both use, each with the LICENSE; the client's Lua scripts in
#    `delayer-protocol`, the server's own in `delayer-server`;
#  - Python: wheel and sdist built with `python -m build`, the Lua scripts
#    inside both, the SDK's tests run against the installed wheel under the
#    oldest Python (3.9) with the oldest redis-py allowed and under the
#    newest Python found here with the newest redis-py and hiredis (the only
#    runs of those tests in test.sh);
#  - PHP: `composer validate --strict`, then `composer require
#    delayer/delayer-client:^2.0` in a fresh project from a path repository,
#    and a script that uses the installed package (autoload only) against a
#    real redis-server.
# Called by test.sh; run it alone from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

work=$(mktemp -d)
redis_pid=
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "check-packaging: $*" >&2; exit 1; }

section_name=
section_start=$SECONDS
# Closes the running section (prints how long it took, as test.sh does) and
# opens the next, if named.
section() {
  if [ -n "$section_name" ]; then echo "(took $((SECONDS - section_start)) s: $section_name)"; fi
  section_name=${1:-}
  section_start=$SECONDS
  if [ -n "$section_name" ]; then echo "== $section_name"; fi
}

# Fails unless the file list on stdin has every path given.
has_all() {
  local list; list=$(cat)
  local path
  for path in "$@"; do
    grep -qxF "$path" <<<"$list" || fail "$path is missing from the package"
  done
}

client_scripts=(push push_many pop take remove reserve ack touch release reschedule dead
  push_topic push_many_topic remove_topic release_topic dead_topic)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

section "packaging: Rust crates (cargo package, verified)"
# All at once: the server's dependency on `delayer` (path and version), and
# both crates' on `delayer-protocol`, are then resolved against the crates
# just packaged, as after publishing them.
# --allow-dirty: the checks also run on a working tree with edits.
# Cargo unpacks the SDK crate from that temporary registry into
# $CARGO_HOME/registry/src/-<hash of the target dir's path>/ and reuses a copy
# already there: a machine that ran these checks from the same path before
# would verify the server against an old SDK. Our copies go first.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for crate in delayer delayer-server delayer-protocol; do
  rm -rf "$cargo_home"/registry/src/-*/"$crate-$version" "$cargo_home"/registry/cache/-*/"$crate-$version".crate
done
cargo package -q -j 2 --offline --allow-dirty -p delayer-protocol -p delayer -p delayer-server
crate_files() { tar -tzf "$CARGO_TARGET_DIR/package/$1-$version.crate" | sed "s|^$1-$version/||"; }
crate_files delayer | has_all LICENSE README.md
crate_files delayer-server | has_all LICENSE README.md lua/move.lua
crate_files delayer-protocol | has_all LICENSE src/lib.rs $(printf 'lua/%s.lua ' "${client_scripts[@]}")

section "packaging: Python wheel and sdist (python -m build)"
.venv/bin/python -m build -q --outdir "$work/dist" sdk-python >"$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; fail "python -m build failed"; }
wheel=$(ls "$work"/dist/delayer-"$version"-py3-none-any.whl)
sdist=$(ls "$work"/dist/delayer-"$version".tar.gz)
.venv/bin/python -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$wheel" \
  >"$work/wheel.txt"
has_all delayer/py.typed $(printf 'delayer/lua/%s.lua ' "${client_scripts[@]}") <"$work/wheel.txt"
# setuptools puts it under dist-info/ or, since PEP 639, dist-info/licenses/.
grep -q "^delayer-$version.dist-info/\(licenses/\)\?LICENSE$" "$work/wheel.txt" || fail "the wheel has no LICENSE"
tar -tzf "$sdist" | sed "s|^delayer-$version/||" \
  | has_all pyproject.toml README.md LICENSE src/delayer/py.typed $(printf 'src/delayer/lua/%s.lua ' "${client_scripts[@]}")

# The oldest Python the package claims (requires-python) and the newest one
# this machine has: from PATH or pyenv.
find_python() {
  local v=$1 p
  # pyenv's shims are on PATH for every version, so each is tried.
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/"python$v" "$(command -v "python$v" 2>/dev/null)"; do
    if [ -n "$p" ] && [ -x "$p" ] && "$p" -c "import sys, venv; assert sys.version.startswith('$v.')" 2>/dev/null; then
      echo "$p"; return 0
    fi
  done
  return 1
}
oldest=$(sed -n 's/^requires-python = ">=\([0-9.]*\)"/\1/p' sdk-python/pyproject.toml)
[ -n "$oldest" ] || fail "cannot read requires-python from sdk-python/pyproject.toml"
newest=
for minor in $(seq 20 -1 "${oldest#3.}"); do
  if find_python "3.$minor" >/dev/null; then newest="3.$minor"; break; fi
done
# The Python SDK's tests run here only (test.sh runs mypy), against the
# installed wheel, twice: the oldest Python with the oldest redis-py the
# package allows (the lower bound in its `dependencies`) and redis-py's
# pure-Python reply parser; the newest Python with the newest redis-py pip
# picks and hiredis (the `hiredis` extra, the C parser). Both ends of both
# ranges and both parsers, in two runs.
oldest_redis=$(sed -n 's/^dependencies = \["redis>=\([0-9.]*\),.*/\1/p' sdk-python/pyproject.toml)
[ -n "$oldest_redis" ] || fail "cannot read the oldest redis-py from sdk-python/pyproject.toml"
[ -n "$newest" ] || newest=$oldest   # none found: the warning below says so
# One run after the other: side by side, the load on a small machine
# breaks the suite's timing margins. Each run is split over two pytest-xdist
# workers (each starts its own redis-servers: the fixtures are per process),
# which halves its time on a 2-core machine.
for run in "$oldest oldest" "$newest newest"; do
  read -r v redis_end <<<"$run"
  if ! py=$(find_python "$v"); then
    echo "check-packaging: WARNING: no python$v here (pyenv install $v): the wheel is not tested under it" >&2
    continue
  fi
  section "packaging: the wheel's tests under Python $v ($py), $redis_end redis-py"
  venv=".venv-py$v-redis-$redis_end"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  pip=("$venv/bin/pip" install -q --disable-pip-version-check)
  if [ "$redis_end" = oldest ]; then
    "${pip[@]}" "$wheel" pytest pytest-xdist "redis==$oldest_redis"
    want_hiredis=False
    if "$venv/bin/python" -c 'import hiredis' 2>/dev/null; then "$venv/bin/pip" uninstall -q -y hiredis; fi
  else
    # Eager: also in a venv kept from an earlier run, redis-py and hiredis
    # are the newest the package allows.
    "${pip[@]}" --upgrade --upgrade-strategy eager "$wheel[hiredis]" pytest pytest-xdist
    want_hiredis=True
  fi
  # The same version number as last run, so pip would keep the old build.
  "${pip[@]}" --force-reinstall --no-deps "$wheel"
  # From outside the source tree, so that `import delayer` is the wheel's.
  (cd "$work" && "$repo/$venv/bin/python" -c 'import delayer, sys; assert "site-packages" in delayer.__file__, delayer.__file__')
  read -r redis_version hiredis < <("$venv/bin/python" -c 'import redis, redis.utils; print(redis.__version__, redis.utils.HIREDIS_AVAILABLE)')
  if [ "$redis_end" = oldest ] && [ "$redis_version" != "$oldest_redis" ]; then
    fail "Python $v: redis-py $redis_version installed, not the oldest allowed ($oldest_redis)"
  fi
  [ "$hiredis" = "$want_hiredis" ] || fail "Python $v: hiredis available: $hiredis, wanted $want_hiredis"
  echo "redis-py $redis_version, hiredis: $hiredis"
  "$venv/bin/pytest" -q -p no:cacheprovider -n 2 sdk-python/tests >"$work/pytest.log" 2>&1 \
    || { cat "$work/pytest.log" >&2; fail "the Python SDK's tests fail against the wheel under Python $v, redis-py $redis_version"; }
  tail -n 1 "$work/pytest.log"
done

section "packaging: PHP (composer validate, composer require from a path repository)"
(cd sdk-php && composer validate --strict -q)
mkdir "$work/php-app"
cat >"$work/php-app/composer.json" <<EOF
{
    "name": "delayer/packaging-check",
    "require": {},
    "repositories": [
        {"type": "path", "url": "$repo/sdk-php", "options": {"symlink": false, "versions": {"delayer/delayer-client": "$version"}}},
        {"packagist.org": false}
    ]
}
EOF
(cd "$work/php-app" && composer require -q --no-interaction --no-progress 'delayer/delayer-client:^2.0')
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >/dev/null &
redis_pid=$!
cat >"$work/php-app/check.php" <<'EOF'
<?php
// Uses the installed package through Composer's autoloader only.
require __DIR__ . '/vendor/autoload.php';

$port = (int) $argv[1];
$deadline = microtime(true) + 30;
for (;;) {
    try {
        $client = new Delayer\Client(['host' => '127.0.0.1', 'port' => $port]);
        $message = new Delayer\Message(['id' => 'packaging-1', 'topic' => 'packaging', 'body' => 'hello']);
        $pushed = $client->push($message, 60);
        break;
    } catch (RedisException $e) {
        if (microtime(true) > $deadline) {
            throw $e;
        }
        usleep(100000);
    }
}
$removed = $client->remove('packaging-1');
if ($pushed !== true || $removed !== true || Delayer\Client::KEY_JOB_POOL !== 'delayer:job_pool') {
    fwrite(STDERR, "installed delayer/delayer-client does not work: push, remove or constants\n");
    exit(1);
}
echo "installed delayer/delayer-client pushed and removed a job\n";
EOF
(cd "$work/php-app" && php check.php "$port")
section
echo "== packaging: all packages built and installed ($SECONDS s)"
