"""delayer.conf, unreachable Redis and credentials."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from delayer import ConfigError, ConnectionFailed, Delayer, DelayerError, Message
from delayer import aio, config

from conftest import RedisServer, free_port, move_until

CONF = """\
; delayer.conf as the server reads it
[delayer]
pid = /tmp/delayer.pid        ; server-only keys are ignored by the SDK
timer_interval = 1000  # ms
key_prefix = conf:delayer:    ; custom prefix

[redis]
host = 127.0.0.1   ; loopback
port = {port}   ; comment after the value
database = 3 # hash comment
password = {password}
max_idle = 2
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "delayer.conf"
    path.write_text(text, encoding="utf-8")
    return path


def test_from_config_reads_the_server_file(tmp_path: Path, redis_server: RedisServer, raw: "redis.Redis") -> None:
    path = write(tmp_path, CONF.format(port=redis_server.port, password=""))
    s = config.load(path)
    assert (s.host, s.port, s.database, s.username, s.password, s.key_prefix) == (
        "127.0.0.1", redis_server.port, 3, None, None, "conf:delayer:",
    )
    with Delayer.from_config(path) as d:
        d.push("t", "j", 0, b"conf")
        assert d.keys.prefix == "conf:delayer:"
    raw.select(3)
    assert raw.exists("conf:delayer:job_pool") == 1
    move_until(raw, 1, prefix="conf:delayer:")
    with Delayer.from_config(path) as d:
        assert d.pop("t") == Message("j", "t", b"conf")


def test_defaults_when_keys_are_missing(tmp_path: Path) -> None:
    s = config.load(write(tmp_path, "[redis]\n[delayer]\n"))
    assert (s.host, s.port, s.database, s.username, s.password, s.key_prefix) == (
        "127.0.0.1", 6379, 0, None, None, "delayer:",
    )


@pytest.mark.parametrize(
    "key,value",
    [("port", "abc"), ("port", "0"), ("port", "70000"), ("port", "-1"), ("port", "63 79"), ("database", "x"), ("database", "-2")],
)
def test_bad_numbers_name_file_section_and_key(tmp_path: Path, key: str, value: str) -> None:
    path = write(tmp_path, f"[redis]\npassword = hunter2-secret\n{key} = {value}\n")
    with pytest.raises(ConfigError) as info:
        Delayer.from_config(path)
    msg = str(info.value)
    assert str(path) in msg and "[redis]" in msg and key in msg
    assert "hunter2-secret" not in msg


REDIS_KEYS = (
    "url, host, port, database, username, password, tls_ca_file, tls_cert_file, tls_key_file, "
    "max_idle, max_active, idle_timeout, conn_max_lifetime, mode, nodes, master_name, sentinel_username, "
    "sentinel_password, tls, require_noeviction"
)
DELAYER_KEYS = (
    "pid, timer_interval, access_log, error_log, batch_size, key_prefix, layout, log_level, log_format, metrics_addr, "
    "http_addr, http_token, http_read_token, http_allow_remote, "
    "http_allowed_hosts, http_trusted_proxies, http_session_secret, http_session_lifetime, http_max_connections, "
    "http_header_timeout, http_body_timeout, http_redis_timeout, http_max_waiting, metrics_allow_remote"
)


@pytest.mark.parametrize(
    "text,message",
    [
        # a typo must not silently mean the default (127.0.0.1:6379)
        ("[redis]\nhost = 127.0.0.1\nprot = 16391\n", f"3: [redis] prot: unknown key (did you mean port?); [redis] takes {REDIS_KEYS}"),
        (
            "[delayer]\ntimer_interval = 1000\ntimer_intervall = 5\n[redis]\nport = 6379\n",
            f"3: [delayer] timer_intervall: unknown key (did you mean timer_interval?); [delayer] takes {DELAYER_KEYS}",
        ),
        (
            "[redis]\npasword = hunter2-secret   ; a typo\n",
            f"2: [redis] pasword: unknown key (did you mean password?); [redis] takes {REDIS_KEYS}",
        ),
        # nothing close: no suggestion
        ("[delayer]\nworkers = 4\n", f"2: [delayer] workers: unknown key; [delayer] takes {DELAYER_KEYS}"),
        (
            "[Redis]\nport = 1\n",
            "1: [Redis]: unknown section (did you mean [redis]?); known sections are [delayer] and [redis]",
        ),
        ("[redis]\nport = 6379\n\n[mysql]\nhost = db\n", "4: [mysql]: unknown section; known sections are [delayer] and [redis]"),
        ("port = 6379\n[redis]\nhost = 127.0.0.1\n", "1: port: keys must be inside a [delayer] or [redis] section"),
    ],
)
def test_what_the_server_refuses_from_config_refuses_with_its_message(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    for reader in (Delayer.from_config, aio.Delayer.from_config, config.load):
        with pytest.raises(ConfigError) as info:
            reader(path)
        assert str(info.value) == f"{path}:{message}"
        assert "hunter2-secret" not in str(info.value)


def test_delayer_1x_keys_this_version_does_not_use_are_logged_not_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the first 1.0 layout of mix-basic/delayer's delayer.conf
    path = write(
        tmp_path,
        "[delayerd]\ninterval = 1000 ; ms\naccess_log = logs/access.log\nerror_log = logs/error.log\n\n"
        "[redis]\nhost = 127.0.0.1\nport = 6390\ndatabase = 0\npassword =   ; none\ntimeout = 3\n"
        "max_idle = 2\nmax_active = 20\n",
    )
    with caplog.at_level("WARNING", logger="delayer"):
        settings = config.load(path)
    assert (settings.host, settings.port) == ("127.0.0.1", 6390)
    warned = [r.getMessage() for r in caplog.records if r.name == "delayer"]
    assert warned == [
        f"{path}:2: [delayerd] interval: ignored: {config.IGNORED_1X[('delayerd', None)]}",
        f"{path}:3: [delayerd] access_log: ignored: {config.IGNORED_1X[('delayerd', None)]}",
        f"{path}:4: [delayerd] error_log: ignored: {config.IGNORED_1X[('delayerd', None)]}",
        f"{path}:11: [redis] timeout: ignored: Delayer 1.x's command timeout, not used",
    ]


def test_every_key_the_server_takes_is_taken(tmp_path: Path) -> None:
    text = (
        "[delayer]\npid = d.pid\ntimer_interval = 1000\naccess_log = a.log\nerror_log = e.log\nbatch_size = 100\n"
        "key_prefix = k:\nlog_level = info\nmetrics_addr = 127.0.0.1:9464\n[empty]\n"
        "[redis]\nurl =\nhost = 127.0.0.1\nport = 6380\ndatabase = 1\nusername =\npassword =\ntls_ca_file =\n"
        "tls_cert_file =\ntls_key_file =\nmax_idle = 2\nmax_active = 20\nidle_timeout = 3600\nconn_max_lifetime = 0\n"
        "require_noeviction = true\n"  # the server's (issue 20): taken, its value not read
    )
    s = config.load(write(tmp_path, text))  # a section without keys is let be, as by the server
    assert (s.host, s.port, s.database, s.key_prefix) == ("127.0.0.1", 6380, 1, "k:")


def test_unreadable_or_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        Delayer.from_config(tmp_path / "missing.conf")
    path = write(tmp_path, "password = leaked-secret\n[redis]\n")
    with pytest.raises(ConfigError) as info:
        config.load(path)
    assert "leaked-secret" not in str(info.value)
    path = write(tmp_path, "[redis]\nport = 1\nport = 2\n")
    with pytest.raises(ConfigError, match="port"):
        config.load(path)


def test_unreachable_redis_fails_fast() -> None:
    port = free_port()  # nobody listens there
    d = Delayer(f"redis://127.0.0.1:{port}/0")
    start = time.monotonic()
    for call in (lambda: d.push("t", "j", 1), lambda: d.pop("t"), lambda: d.bpop("t", 0.1), lambda: d.remove("j")):
        with pytest.raises(ConnectionFailed) as info:
            call()
        assert f"cannot reach Redis at 127.0.0.1:{port}" in str(info.value)
        assert isinstance(info.value, DelayerError)
    assert time.monotonic() - start < 3
    d.close()


def test_wrong_password_is_connection_failed_and_never_shown(auth_server: RedisServer, tmp_path: Path) -> None:
    wrong = "wr0ng-PASSWORD-x"
    d = Delayer(f"redis://:{wrong}@127.0.0.1:{auth_server.port}/0")
    assert wrong not in repr(d)
    with pytest.raises(ConnectionFailed) as info:
        d.push("t", "j", 1)
    assert wrong not in str(info.value)
    assert wrong not in repr(info.value)
    assert wrong not in str(info.value.__cause__)
    d.close()

    with Delayer(f"redis://127.0.0.1:{auth_server.port}/0") as d:  # no password at all
        with pytest.raises(ConnectionFailed):
            d.pop("t")

    path = write(tmp_path, CONF.format(port=auth_server.port, password=wrong))
    with Delayer.from_config(path) as d:
        assert wrong not in repr(d)
        assert wrong not in repr(config.load(path))
        with pytest.raises(ConnectionFailed) as info:
            d.pop("t")
        assert wrong not in str(info.value)

    right = auth_server.password
    assert right is not None
    path = write(tmp_path, CONF.format(port=auth_server.port, password=right))
    with Delayer.from_config(path) as d:
        assert right not in repr(d)
        assert d.pop("t") is None
    with Delayer(auth_server.url) as d:
        assert right not in repr(d)
        assert d.remove("x") is False


def test_bad_url_is_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        Delayer("http://:pw-in-url@127.0.0.1:1/0")
    assert "pw-in-url" not in str(info.value)


def test_redis_error_reply_is_protocol_error(url: str, raw: "redis.Redis") -> None:
    from delayer import ProtocolError

    raw.set("delayer:job_pool", "not a zset")
    with Delayer(url) as d:
        with pytest.raises(ProtocolError):
            d.push("t", "j", 1)
