"""One rule for ``delayer.conf``: what the server refuses, every SDK refuses.

A typo in the file the server and the applications share (``prot = 16391``)
must not silently mean a default (127.0.0.1:6379) in an SDK while the server
refuses the same file. The rule, which this test states and checks against
the server binary and the config reader of each SDK (rust ``from_conf``,
python ``from_config``, php ``fromConfig``):

- a file holds the sections ``[delayer]`` and ``[redis]`` only, every key
  inside one of them, and only the keys listed in ``KNOWN_KEYS`` (the server
  uses them all; an SDK reads what it needs and accepts the others);
- anything else is refused with one message, the same everywhere:
  ``<file>:<line>: [<section>] <key>: unknown key; [<section>] takes <keys>``
  (``<file>:<line>: [<section>]: unknown section; known sections are
  [delayer] and [redis]``, ``<file>:<line>: <key>: keys must be inside a
  [delayer] or [redis] section``).

The server exits 2 with that message on stderr; each driver answers the
``read_config`` request with ``config: ...`` holding it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import harness

SDKS = ["rust", "python", "php"]

#: Every key a delayer.conf may hold, per section, in the order messages list them.
KNOWN_KEYS: Dict[str, List[str]] = {
    "delayer": ["pid", "timer_interval", "access_log", "error_log", "batch_size", "key_prefix", "log_level",
                "metrics_addr"],
    "redis": ["url", "host", "port", "database", "username", "password", "tls_ca_file", "tls_cert_file",
              "tls_key_file", "max_idle", "max_active", "idle_timeout", "conn_max_lifetime"],
}


def unknown_key(line: int, section: str, key: str) -> Tuple[int, str]:
    return line, f"{line}: [{section}] {key}: unknown key; [{section}] takes {', '.join(KNOWN_KEYS[section])}"


#: name: (file text, (line, the message after "<file>:")).
BAD_FILES: Dict[str, Tuple[str, Tuple[int, str]]] = {
    "redis-typo": (
        "[redis]\nhost = 127.0.0.1\nprot = 16391\n",
        unknown_key(3, "redis", "prot"),
    ),
    "delayer-typo": (
        "[delayer]\ntimer_interval = 1000\ntimer_intervall = 5\n\n[redis]\nport = 6379\n",
        unknown_key(3, "delayer", "timer_intervall"),
    ),
    "1x-file-with-a-typo": (
        "[delayer]\npid = /var/run/delayer.pid      ; comment\ntimer_interval = 1000\n\n"
        "[redis]\nhost = 127.0.0.1                ; address\nport = 6379\ndatabase = 0\n"
        "pasword = secret                ; a typo of password\n",
        unknown_key(9, "redis", "pasword"),
    ),
    "unknown-section": (
        "[redis]\nport = 6379\n\n[mysql]\nhost = db\n",
        (4, "4: [mysql]: unknown section; known sections are [delayer] and [redis]"),
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
    assert "secret" not in stderr


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
    assert "secret" not in error


@pytest.mark.parametrize("sdk", SDKS)
def test_every_sdk_takes_every_key_the_server_takes(
    drivers: Any, confdir: Path, redis_server: harness.RedisServer, sdk: str
) -> None:
    values = {
        "pid": "delayer.pid", "timer_interval": "1000", "access_log": "access.log", "error_log": "error.log",
        "batch_size": "100", "key_prefix": "conf-rule:", "log_level": "info", "metrics_addr": "127.0.0.1:9464",
        "host": "127.0.0.1", "port": str(redis_server.port), "database": "0", "username": "", "password": "",
        "max_idle": "2", "max_active": "20", "idle_timeout": "3600", "conn_max_lifetime": "3600",
    }
    # url excludes host/port/database, and the TLS files must exist: written
    # empty, as a 1.x file writes an unused key.
    lines = ["[delayer]"] + [f"{k} = {values[k]}" for k in KNOWN_KEYS["delayer"]]
    lines += ["", "[redis]"] + [f"{k} = {values.get(k, '')}" for k in KNOWN_KEYS["redis"]]
    path = write(confdir, "every-key", "\n".join(lines) + "\n")
    r = drivers[sdk].request({"op": "read_config", "path": str(path)})
    assert r == {"ok": True, "prefix": "conf-rule:"}, f"{sdk}: {r}"
