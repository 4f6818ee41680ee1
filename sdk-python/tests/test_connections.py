"""Reaching Redis in every supported way, from delayer.conf and from the
constructor: TLS with a private CA, an ACL user limited to the delayer keys,
a unix socket; and the config errors of those settings (as the Rust SDK's).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Tuple

import pytest
import redis

from delayer import ConfigError, ConnectionFailed, Delayer, Message
from delayer import aio, config

from conftest import ACL_PASSWORD, ACL_USER, RedisServer, move_until

Certs = Tuple[Path, Path, Path]


def write(dir: Path, text: str) -> Path:
    path = dir / "delayer.conf"
    path.write_text(text, encoding="utf-8")
    return path


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def round_trip(path: Path, raw: "redis.Redis") -> None:
    """push from the file's client, make due with the real move.lua, pop (sync, then async)."""
    job = unique("job")
    with Delayer.from_config(path) as d:
        d.push("t", job, 0, b"via-conf")
        move_until(raw, 1)
        assert d.bpop("t", 2) == Message(job, "t", b"via-conf")

    async def main() -> None:
        async with aio.Delayer.from_config(path) as d:
            await d.push("t", job, 0, b"async")
            move_until(raw, 1)
            assert await d.bpop("t", 2) == Message(job, "t", b"async")

    asyncio.run(main())


# --------------------------------------------------------------------------
# TLS


def test_tls_with_a_private_ca(tmp_path: Path, tls_server: RedisServer, certs: Certs) -> None:
    _, _, ca = certs
    # a relative path is relative to the file's directory
    (tmp_path / "ca.pem").write_bytes(ca.read_bytes())
    path = write(tmp_path, f"[redis]\nurl = rediss://127.0.0.1:{tls_server.port}/0\ntls_ca_file = ca.pem\n")
    raw = tls_server.client()
    try:
        round_trip(path, raw)
    finally:
        raw.close()
    with Delayer(f"rediss://127.0.0.1:{tls_server.port}/0", tls_ca_file=ca) as d:
        assert d.pop("t") is None


def test_tls_without_the_ca_is_a_connection_error(tmp_path: Path, tls_server: RedisServer) -> None:
    path = write(tmp_path, f"[redis]\nurl = rediss://127.0.0.1:{tls_server.port}/0\n")
    start = time.monotonic()
    with Delayer.from_config(path) as d:
        with pytest.raises(ConnectionFailed) as info:
            d.push("t", "j", 1)
    assert "certificate" in str(info.value).lower()
    # plain text to a TLS port fails as well, quickly
    with Delayer(f"redis://127.0.0.1:{tls_server.port}/0") as d:
        with pytest.raises(ConnectionFailed):
            d.pop("t")

    async def main() -> None:
        async with aio.Delayer.from_config(path) as d:
            with pytest.raises(ConnectionFailed):
                await d.pop("t")

    asyncio.run(main())
    assert time.monotonic() - start < 10


def test_client_certificate_files_are_passed_to_redis_py(tmp_path: Path, certs: Certs) -> None:
    cert, key, ca = certs  # any PEM pair will do: nothing connects here
    with Delayer("rediss://127.0.0.1:1/0", tls_ca_file=ca, tls_cert_file=cert, tls_key_file=key) as d:
        kw = d.redis.connection_pool.connection_kwargs
        assert (kw["ssl_ca_certs"], kw["ssl_certfile"], kw["ssl_keyfile"]) == (str(ca), str(cert), str(key))
    path = write(tmp_path, f"[redis]\nurl = rediss://127.0.0.1:1/0\ntls_cert_file = {cert}\ntls_key_file = {key}\n")
    s = config.load(path)
    assert (s.tls_cert_file, s.tls_key_file, s.tls_ca_file) == (str(cert), str(key), None)

    # Made inside a running loop: on Python 3.9, redis-py's asyncio pool binds
    # to the loop current when it is made, and there is none after asyncio.run.
    async def made_in_a_loop() -> str:
        d2 = aio.Delayer.from_config(path)
        return str(d2.redis.connection_pool.connection_kwargs["ssl_certfile"])

    assert asyncio.run(made_in_a_loop()) == str(cert)


# --------------------------------------------------------------------------
# ACL


def test_an_acl_user_limited_to_the_delayer_keys(tmp_path: Path, acl_server: RedisServer) -> None:
    path = write(tmp_path, f"[redis]\nport = {acl_server.port}\nusername = {ACL_USER}\npassword = {ACL_PASSWORD}\n")
    raw = redis.Redis(host="127.0.0.1", port=acl_server.port, username=ACL_USER, password=ACL_PASSWORD)
    try:
        round_trip(path, raw)
        with Delayer.from_config(path) as d:
            assert ACL_PASSWORD not in repr(d)
            with pytest.raises(redis.exceptions.NoPermissionError):
                d.redis.set("other:key", 1)  # outside delayer:*: refused
    finally:
        raw.close()
    # the conf's username and password override the URL's
    url = f"redis://nobody:wrong@127.0.0.1:{acl_server.port}/0"
    with Delayer(url, username=ACL_USER, password=ACL_PASSWORD) as d:
        assert d.remove("nothing") is False


@pytest.mark.parametrize("user", [ACL_USER, None])
def test_a_wrong_acl_password_is_a_connection_error(tmp_path: Path, acl_server: RedisServer, user: str) -> None:
    wrong = "not-the-acl-pw-123"
    user_line = f"username = {user}\n" if user else ""
    path = write(tmp_path, f"[redis]\nport = {acl_server.port}\n{user_line}password = \"{wrong}\"\n")
    start = time.monotonic()
    with Delayer.from_config(path) as d:
        assert wrong not in repr(d)
        with pytest.raises(ConnectionFailed) as info:
            d.push("t", "j", 1)
    assert "refused the credentials" in str(info.value)
    assert wrong not in str(info.value) and wrong not in repr(info.value)
    assert wrong not in str(info.value.__cause__)

    async def main() -> None:
        async with aio.Delayer.from_config(path) as d:
            with pytest.raises(ConnectionFailed) as info:
                await d.pop("t")
            assert wrong not in str(info.value)

    asyncio.run(main())
    assert time.monotonic() - start < 3


# --------------------------------------------------------------------------
# unix socket


@pytest.mark.parametrize("scheme", ["unix", "redis+unix"])
def test_a_unix_socket(tmp_path: Path, socket_server: RedisServer, scheme: str) -> None:
    assert socket_server.socket_path is not None
    path = write(tmp_path, f"[redis]\nurl = {scheme}://{socket_server.socket_path}\n")
    raw = socket_server.client()
    try:
        raw.flushall()
        round_trip(path, raw)
    finally:
        raw.close()
    with Delayer.from_config(path) as d:
        assert str(socket_server.socket_path) in repr(d)


# --------------------------------------------------------------------------
# config errors


def conf_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        Delayer.from_config(path)
    with pytest.raises(ConfigError) as info2:
        aio.Delayer.from_config(path)
    assert str(info.value) == str(info2.value)
    return str(info.value)


def test_url_with_host_port_or_database_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[redis]\nurl = redis://:pw-in-url@127.0.0.1:1/\nport = 6380\n")
    msg = conf_error(path)
    assert msg == f"{path}:3: [redis] port: set either url or host/port/database, not both"
    path = write(tmp_path, "[redis]\ndatabase = 1\nurl = redis://127.0.0.1:1/\nhost = h\n")
    assert f"{path}:4: [redis] host:" in conf_error(path)  # the first of host, port, database


@pytest.mark.parametrize("url", ["http://:pw-in-url@127.0.0.1:1/", "redis://127.0.0.1:99999/", "127.0.0.1:6379"])
def test_a_bad_url_is_a_config_error_naming_url(tmp_path: Path, url: str) -> None:
    path = write(tmp_path, f"[delayer]\n\n[redis]\nurl = {url}\n")
    msg = conf_error(path)
    assert msg == f"{path}:4: [redis] url: not a redis://, rediss:// or unix:// URL"


def test_tls_files_must_come_in_pairs_and_be_readable(tmp_path: Path, certs: Certs) -> None:
    cert, key, ca = certs
    path = write(tmp_path, f"[redis]\nurl = rediss://127.0.0.1:1/\n\ntls_cert_file = {cert}\n")
    assert conf_error(path) == f"{path}:4: [redis] tls_cert_file: needs tls_key_file too"
    path = write(tmp_path, f"[redis]\ntls_key_file = {key}\n")
    assert conf_error(path) == f"{path}:2: [redis] tls_key_file: needs tls_cert_file too"
    path = write(tmp_path, "[redis]\ntls_ca_file = missing/ca.pem ; relative to the file\n")
    msg = conf_error(path)
    assert msg.startswith(f"{path}:2: [redis] tls_ca_file: cannot read missing/ca.pem")
    with pytest.raises(ConfigError, match="tls_cert_file needs tls_key_file"):
        Delayer("rediss://127.0.0.1:1/", tls_cert_file=cert)
    with pytest.raises(ConfigError, match="tls_ca_file: cannot read"):
        aio.Delayer("rediss://127.0.0.1:1/", tls_ca_file=tmp_path / "nope.pem")


def test_quoted_values_are_unquoted(tmp_path: Path) -> None:
    path = write(tmp_path, (
        "[redis]\n"
        "password = \";secret\"   ; a quoted value keeps its ';'\n"
        "username = 'a #b'\n"
        "url = \"unix:///tmp/r.sock\"\n"
        "tls_ca_file =   ; only a comment: empty\n"
        "[delayer]\n"
        "key_prefix = 'q:'\n"
    ))
    s = config.load(path)
    assert (s.password, s.username, s.url, s.tls_ca_file, s.key_prefix) == (
        ";secret", "a #b", "unix:///tmp/r.sock", None, "q:"
    )
    assert ";secret" not in repr(s) and "r.sock" not in repr(s)


def test_the_repository_sample_file_is_read(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[2] / "delayer.conf"
    s = config.load(sample)
    assert (s.url, s.host, s.port, s.database, s.username, s.password) == (None, "127.0.0.1", 6379, 0, None, None)
    assert (s.tls_ca_file, s.tls_cert_file, s.tls_key_file) == (None, None, None)
