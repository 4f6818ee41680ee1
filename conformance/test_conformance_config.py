"""One rule for ``delayer.conf``: what the server refuses, every SDK refuses.

A typo in the file the server and the applications share (``prot = 16391``)
must not silently mean a default (127.0.0.1:6379) in an SDK while the server
refuses the same file. The rule, which this test states and checks against
the server binary and the config reader of each SDK (rust ``from_conf``,
python ``from_config``, php ``fromConfig``):

- a file holds the sections ``[delayer]`` and ``[redis]`` only, every key
  inside one of them, and only the keys listed in ``KNOWN_KEYS`` (the server
  uses them all; an SDK reads what it needs and accepts the others), plus any
  number of ``[webhook.<topic>]`` sections with the keys in ``WEBHOOK_KEYS``
  (read by ``delayer webhook`` only);
- what a Delayer 1.x release wrote and this version does not use
  (``IGNORED_1X``: the early ``[delayerd]`` section, ``[redis] timeout``) is
  accepted: the server logs each such key with its file and line and starts,
  an SDK takes the file (silently, or with a warning on its logger); so the
  ``delayer.conf`` of every 1.x release works unchanged;
- anything else is refused with one message, the same everywhere:
  ``<file>:<line>: [<section>] <key>: unknown key; [<section>] takes <keys>``
  (``<file>:<line>: [<section>]: unknown section; known sections are
  [delayer] and [redis]``, ``<file>:<line>: <key>: keys must be inside a
  [delayer] or [redis] section``), with `` (did you mean <name>?)`` after
  ``unknown key`` (``[<name>]`` after ``unknown section``) when a known name
  is at most 2 edits away, or a third of the name's length in bytes
  (Levenshtein; the first such name in the order below wins a tie).

The server exits 2 with that message on stderr; each driver answers the
``read_config`` request with ``config: ...`` holding it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import harness

SDKS = ["rust", "python", "php"]

#: Every key a delayer.conf may hold, per section, in the order messages list them.
KNOWN_KEYS: Dict[str, List[str]] = {
    "delayer": ["pid", "timer_interval", "access_log", "error_log", "batch_size", "key_prefix", "layout", "log_level",
                "log_format", "metrics_addr", "http_addr", "http_token", "http_read_token", "http_allow_remote",
                "http_allowed_hosts", "http_trusted_proxies", "http_session_secret", "http_session_lifetime",
                "http_max_connections", "http_header_timeout", "http_body_timeout", "http_redis_timeout",
                "http_max_waiting", "metrics_allow_remote"],
    "redis": ["url", "host", "port", "database", "username", "password", "tls_ca_file", "tls_cert_file",
              "tls_key_file", "max_idle", "max_active", "idle_timeout", "conn_max_lifetime", "mode", "nodes",
              "master_name", "sentinel_username", "sentinel_password", "tls", "require_noeviction"],
}

#: The keys of a ``[webhook.<topic>]`` section (any non-empty topic after the
#: dot): read by ``delayer webhook`` only, accepted by every reader.
WEBHOOK_KEYS: List[str] = ["url", "secret", "secret_file", "timeout", "concurrency", "ttr"]


def unknown_key(line: int, section: str, key: str, near: Optional[str] = None) -> Tuple[int, str]:
    hint = f" (did you mean {near}?)" if near else ""
    return line, f"{line}: [{section}] {key}: unknown key{hint}; [{section}] takes {', '.join(KNOWN_KEYS[section])}"


#: name: (file text, (line, the message after "<file>:")).
BAD_FILES: Dict[str, Tuple[str, Tuple[int, str]]] = {
    "redis-typo": (
        "[redis]\nhost = 127.0.0.1\nprot = 16391\n",
        unknown_key(3, "redis", "prot", "port"),
    ),
    "delayer-typo": (
        "[delayer]\ntimer_interval = 1000\ntimer_intervall = 5\n\n[redis]\nport = 6379\n",
        unknown_key(3, "delayer", "timer_intervall", "timer_interval"),
    ),
    "1x-file-with-a-typo": (
        "[delayer]\npid = /var/run/delayer.pid      ; comment\ntimer_interval = 1000\n\n"
        "[redis]\nhost = 127.0.0.1                ; address\nport = 6379\ndatabase = 0\n"
        "pasword = hunter2               ; a typo of password\n",
        unknown_key(9, "redis", "pasword", "password"),
    ),
    "nothing-close": (
        "[delayer]\nworkers = 4\n",
        unknown_key(2, "delayer", "workers"),
    ),
    "case-of-a-key": (
        "[redis]\nPort = 6379\n",
        unknown_key(2, "redis", "Port", "port"),
    ),
    "a-1x-key-in-the-wrong-section": (
        "[delayer]\ntimeout = 3\n",
        unknown_key(2, "delayer", "timeout"),
    ),
    "section-typo": (
        "[reddis]\nport = 6379\n",
        (1, "1: [reddis]: unknown section (did you mean [redis]?); known sections are [delayer] and [redis]"),
    ),
    "unknown-section": (
        "[redis]\nport = 6379\n\n[mysql]\nhost = db\n",
        (4, "4: [mysql]: unknown section; known sections are [delayer] and [redis]"),
    ),
    "webhook-typo": (
        "[redis]\nport = 6379\n\n[webhook.orders]\nurl = http://127.0.0.1:9/hook\ntmeout = 5\n",
        (6, "6: [webhook.orders] tmeout: unknown key (did you mean timeout?); [webhook.orders] takes "
            + ", ".join(WEBHOOK_KEYS)),
    ),
    "layout-unknown": (
        "[delayer]\nlayout = columns\n",
        (2, '2: [delayer] layout: "columns" is not one of classic, topic'),
    ),
    # [redis] mode: cluster needs its seed nodes, database 0, no fixed address
    # and the per-topic layout; sentinel needs its keys and takes no fixed
    # address; sentinel keys need sentinel mode.
    "cluster-without-nodes": (
        "[delayer]\nlayout = topic\n\n[redis]\nmode = cluster\n",
        (5, "5: [redis] mode: mode = cluster needs nodes (seed nodes: host:port,host:port,...)"),
    ),
    "cluster-with-the-classic-layout": (
        "[redis]\nmode = cluster\nnodes = 127.0.0.1:7000\n",
        (2, "2: [redis] mode: mode = cluster needs [delayer] layout = topic (the classic layout keeps every job "
            "in one key)"),
    ),
    "cluster-with-a-database": (
        "[delayer]\nlayout = topic\n\n[redis]\nmode = cluster\nnodes = 127.0.0.1:7000\ndatabase = 2\n",
        (7, "7: [redis] database: Redis Cluster has only database 0"),
    ),
    "cluster-with-a-host": (
        "[delayer]\nlayout = topic\n\n[redis]\nmode = cluster\nnodes = 127.0.0.1:7000\nhost = 127.0.0.1\n",
        (7, "7: [redis] host: not used with mode = cluster: the nodes name the cluster"),
    ),
    "sentinel-without-master-name": (
        "[redis]\nmode = sentinel\nnodes = 127.0.0.1:26379\n",
        (2, "2: [redis] mode: mode = sentinel needs master_name"),
    ),
    "sentinel-without-nodes": (
        "[redis]\nmode = sentinel\nmaster_name = m\n",
        (2, "2: [redis] mode: mode = sentinel needs nodes (the sentinels: host:port,host:port,...)"),
    ),
    "sentinel-with-a-bad-node": (
        "[redis]\nmode = sentinel\nnodes = 127.0.0.1:26379,sentinel-2\nmaster_name = m\n",
        (3, '3: [redis] nodes: "sentinel-2" is not host:port'),
    ),
    "sentinel-with-a-host": (
        "[redis]\nmode = sentinel\nnodes = 127.0.0.1:26379\nmaster_name = m\nhost = 127.0.0.1\n",
        (5, "5: [redis] host: not used with mode = sentinel: the sentinels name the master (nodes)"),
    ),
    "nodes-in-standalone-mode": (
        "[redis]\nhost = 127.0.0.1\nnodes = 127.0.0.1:26379\n",
        (3, "3: [redis] nodes: is only used with mode = sentinel or cluster (mode is standalone)"),
    ),
    "key-outside-a-section": (
        "port = 6379\n[redis]\nhost = 127.0.0.1\n",
        (1, "1: port: keys must be inside a [delayer] or [redis] section"),
    ),
}


@pytest.fixture(scope="module")
def confdir(workdir: Path) -> Path:
    d = workdir / "config-rule"
    d.mkdir(exist_ok=True)
    return d


def write(confdir: Path, name: str, text: str) -> Path:
    path = confdir / f"{name}.conf"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", BAD_FILES)
def test_the_server_refuses_a_bad_file_naming_file_line_and_key(confdir: Path, name: str) -> None:
    text, (_, message) = BAD_FILES[name]
    path = write(confdir, name, text)
    exe = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
    run = subprocess.run([str(exe), "-c", str(path)], capture_output=True, timeout=harness.DEADLINE,
                         stdin=subprocess.DEVNULL)
    stderr = run.stderr.decode("utf-8", "replace")
    assert run.returncode == 2, f"exit {run.returncode}: {stderr}"
    assert f"{path}:{message}" in stderr, stderr
    assert "hunter2" not in stderr


@pytest.mark.parametrize("name", BAD_FILES)
@pytest.mark.parametrize("sdk", SDKS)
def test_every_sdk_refuses_a_bad_file_as_the_server_does(drivers: Any, confdir: Path, sdk: str, name: str) -> None:
    text, (_, message) = BAD_FILES[name]
    path = write(confdir, name, text)
    r = drivers[sdk].request({"op": "read_config", "path": str(path)})
    assert r["ok"] is False, f"{sdk} accepted {name}: {r}"
    error: str = r["error"]
    assert error.startswith("config: "), f"{sdk}: not a config error: {error}"
    assert f"{path}:{message}" in error, f"{sdk}: {error}"
    assert "hunter2" not in error


@pytest.mark.parametrize("sdk", SDKS)
def test_every_sdk_takes_every_key_the_server_takes(
    drivers: Any, confdir: Path, redis_server: harness.RedisServer, sdk: str
) -> None:
    values = {
        "pid": "delayer.pid", "timer_interval": "1000", "access_log": "access.log", "error_log": "error.log",
        "batch_size": "100", "key_prefix": "conf-rule:", "layout": "classic", "log_level": "info", "log_format": "text",
        "metrics_addr": "127.0.0.1:9464",
        "http_addr": "127.0.0.1:8080", "http_token": "a-token-of-32-characters-0123456",
        "http_read_token": "a-read-token-of-32-characters-01", "http_allow_remote": "no",
        "http_allowed_hosts": "delayer.example.com", "http_trusted_proxies": "127.0.0.1",
        "http_session_secret": "a-session-secret-of-32-chars-012", "http_session_lifetime": "3600",
        "http_max_connections": "512", "http_header_timeout": "10", "http_body_timeout": "30", "http_redis_timeout": "5",
        "http_max_waiting": "100", "metrics_allow_remote": "no",
        "host": "127.0.0.1", "port": str(redis_server.port), "database": "0", "username": "", "password": "",
        "max_idle": "2", "max_active": "20", "idle_timeout": "3600", "conn_max_lifetime": "3600",
        "require_noeviction": "no",
    }
    # url excludes host/port/database, and the TLS files must exist: written
    # empty, as a 1.x file writes an unused key.
    lines = ["[delayer]"] + [f"{k} = {values[k]}" for k in KNOWN_KEYS["delayer"]]
    lines += ["", "[redis]"] + [f"{k} = {values.get(k, '')}" for k in KNOWN_KEYS["redis"]]
    lines += ["", "[webhook.close order]", "url = https://example.com/hooks/close?x=1", "secret = s3cr3t",
              "timeout = 10", "concurrency = 4", "ttr = 60"]
    path = write(confdir, "every-key", "\n".join(lines) + "\n")
    r = drivers[sdk].request({"op": "read_config", "path": str(path)})
    assert r == {"ok": True, "prefix": "conf-rule:"}, f"{sdk}: {r}"


@pytest.mark.parametrize("sdk", SDKS)
def test_every_sdk_reads_the_per_topic_layout(drivers: Any, confdir: Path, sdk: str) -> None:
    """layout = topic is taken by every SDK's reader; a prefix with a brace
    (it would move every name's hash tag) is refused, naming the key."""
    path = write(confdir, "topic-layout", "[delayer]\nlayout = topic\n\n[redis]\nport = 6379\n")
    r = drivers[sdk].request({"op": "read_config", "path": str(path)})
    assert r["ok"] is True, f"{sdk} refused layout = topic: {r}"
    path = write(confdir, "topic-brace", "[delayer]\nlayout = topic\nkey_prefix = a{b}:\n\n[redis]\nport = 6379\n")
    r = drivers[sdk].request({"op": "read_config", "path": str(path)})
    assert r["ok"] is False, f"{sdk} accepted a brace in the prefix: {r}"
    assert "[delayer] key_prefix" in r["error"], r["error"]


#: The delayer.conf of each Delayer 1.x layout (mix-basic/delayer's history),
#: with its inline comments; {port} and {dir} are filled in. name: (text,
#: the (line, section, key) the server reports as ignored).
FILES_1X: Dict[str, Tuple[str, List[Tuple[int, str, str]]]] = {
    "1.0-early": (
        "[delayerd]\ninterval = 1000                 ; ms\naccess_log = {dir}/access.log    ; log\n"
        "error_log = {dir}/error.log      ; log\n\n[redis]\nhost = 127.0.0.1                ; address\n"
        "port = {port}\ndatabase = 0                    ; db\npassword =                      ; none\n"
        "timeout = 3                     ; seconds\nmax_idle = 2\nmax_active = 20\n",
        [(2, "delayerd", "interval"), (3, "delayerd", "access_log"), (4, "delayerd", "error_log"),
         (11, "redis", "timeout")],
    ),
    "1.0.x": (
        "[delayer]\npid = delayer.pid      ; single instance\ntimer_interval = 1000           ; ms\n"
        "access_log = logs/access.log    ; log\nerror_log = logs/error.log      ; log\n\n"
        "[redis]\nhost = 127.0.0.1                ; address\nport = {port}\ndatabase = 0\n"
        "password =                      ; none\nmax_idle = 2\nmax_active = 20\nidle_timeout = 3600\n"
        "conn_max_lifetime = 3600        ; seconds\n",
        [],
    ),
}


def write_1x(confdir: Path, name: str, port: int) -> Path:
    d = confdir / f"1x-{name}"
    d.mkdir(exist_ok=True)
    return write(d, "delayer", FILES_1X[name][0].format(port=port, dir=d))


@pytest.mark.parametrize("name", FILES_1X)
@pytest.mark.parametrize("sdk", SDKS)
def test_every_sdk_takes_the_file_of_every_1x_release(
    drivers: Any, confdir: Path, redis_server: harness.RedisServer, sdk: str, name: str
) -> None:
    path = write_1x(confdir, name, redis_server.port)
    r = drivers[sdk].request({"op": "read_config", "path": str(path)})
    assert r == {"ok": True, "prefix": "delayer:"}, f"{sdk}: {r}"


@pytest.mark.parametrize("name", FILES_1X)
def test_the_server_starts_on_the_file_of_every_1x_release_saying_what_it_ignores(
    confdir: Path, redis_server: harness.RedisServer, name: str
) -> None:
    path = write_1x(confdir, name, redis_server.port)
    log = path.parent / "server.out"
    exe = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(exe), "-c", str(path)], cwd=path.parent, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        # The access log is the 1.x file's own (1.0.x), or stdout (the early
        # layout's log keys are ignored).
        logs = [log, path.parent / "logs" / "access.log", path.parent / "logs" / "error.log"]

        def said() -> str:
            return "".join(harness.tail(p, 100_000) for p in logs)

        assert harness.wait_until(lambda: proc.poll() is not None or "starting" in said()), said()
        assert proc.poll() is None, f"exited {proc.returncode}: {said()}"
        # Said before "starting", once the logger runs.
        for line, section, key in FILES_1X[name][1]:
            assert f"{path}:{line}: [{section}] {key}: ignored: " in said(), said()
        if not FILES_1X[name][1]:
            assert "ignored" not in said(), said()
    finally:
        harness.stop_process(proc)
