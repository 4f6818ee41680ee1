"""DELAYER_* environment variables over delayer.conf: the shared cases
(conformance/env_cases.json, run by every SDK's reader) and from_config
against a real Redis that requires a password given through a _FILE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from delayer import ConfigError, Delayer, config

from conftest import RedisServer, free_port

CASES = json.loads((Path(__file__).resolve().parents[2] / "conformance" / "env_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_shared_case(case: Dict[str, Any], tmp_path: Path) -> None:
    def fill(text: str) -> str:
        return text.replace("{dir}", str(tmp_path))

    for name, content in case.get("files", {}).items():
        (tmp_path / name).write_text(content)
    path = tmp_path / "delayer.conf"
    path.write_text(case["file"])
    environ = {k: fill(v) for k, v in case["env"].items()}
    if "error" in case:
        with pytest.raises(ConfigError) as e:
            config.load(path, environ)
        assert str(e.value).startswith(fill(case["error"])), str(e.value)
        return
    s = config.load(path, environ)
    effective = {"host": s.host, "port": s.port, "database": s.database, "username": s.username,
                 "password": s.password, "url": s.url, "prefix": s.key_prefix, "layout": s.layout}
    for key, want in case["expect"].items():
        assert effective[key] == want, key


def test_from_config_takes_the_password_file_and_port_from_the_environment(
    auth_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert auth_server.password is not None
    secret = tmp_path / "redis.password"
    secret.write_text(auth_server.password + "\n")
    path = tmp_path / "delayer.conf"
    path.write_text(f"[delayer]\nkey_prefix = env-py:\n\n[redis]\nport = {free_port()}\n")
    monkeypatch.setenv("DELAYER_REDIS_PORT", str(auth_server.port))
    monkeypatch.setenv("DELAYER_REDIS_PASSWORD_FILE", str(secret))
    d = Delayer.from_config(path)
    try:
        d.push("t", "from-env", 60)
        assert auth_server.client().zscore("env-py:job_pool", "from-env") is not None
    finally:
        d.close()
    monkeypatch.setenv("DELAYER_REDIS_PASSWORD", "also")
    with pytest.raises(ConfigError, match="DELAYER_REDIS_PASSWORD is set too") as e:
        Delayer.from_config(path)
    assert auth_server.password not in str(e.value)
