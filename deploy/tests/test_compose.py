"""deploy/compose.yaml and deploy/prometheus/prometheus.yml, checked without
running them (no image registry is reachable from CI): both parse, every
file a service mounts exists, every secret is declared and kept out of git
and of the build context, every DELAYER_* variable names a key of
delayer.conf, Redis keeps its data (AOF, a volume) and never evicts, and
Prometheus scrapes the server's metrics port with the alert rules beside it
(promtool checks them as Prometheus would load them), and Grafana gets the
Prometheus data source and the dashboard.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

import yaml

DEPLOY = Path(__file__).resolve().parents[1]
REPO = DEPLOY.parent
sys.path.insert(0, str(REPO / "conformance"))

import harness  # noqa: E402


def compose() -> Dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(loaded, dict) and isinstance(loaded.get("services"), dict), loaded
    return loaded


def conf_keys(text: str) -> Dict[str, Set[str]]:
    """The keys of each section of an INI file, commented-out ones too
    (delayer.conf documents some keys commented)."""
    keys: Dict[str, Set[str]] = {}
    section = ""
    for line in text.splitlines():
        if m := re.match(r"^;?\s*\[([a-z_.]+)\]", line):
            section = m.group(1)
        elif m := re.match(r"^;?\s*([a-z_]+)\s*=", line):
            keys.setdefault(section, set()).add(m.group(1))
    return keys


def env_key(name: str) -> tuple:
    """DELAYER_REDIS_<KEY>[_FILE] -> ("redis", key); DELAYER_<KEY> -> ("delayer", key)."""
    assert name.startswith("DELAYER_"), name
    rest = name[len("DELAYER_"):].removesuffix("_FILE").lower()
    if rest.startswith("redis_"):
        return "redis", rest[len("redis_"):]
    return "delayer", rest


def mounts(service: Dict[str, Any]) -> List[List[str]]:
    return [v.split(":") for v in service.get("volumes", [])]


def test_redis_persists_and_never_evicts() -> None:
    c = compose()
    redis = c["services"]["redis"]
    args = redis["command"]
    assert args[0] == "redis-server"
    pairs = dict(zip(args[1::2], args[2::2]))
    assert pairs["--appendonly"] == "yes" and pairs["--maxmemory-policy"] == "noeviction", args
    data = [m for m in mounts(redis) if m[1] == "/data"]
    assert data and data[0][0] in c["volumes"], redis["volumes"]
    # The server refuses a Redis that could evict jobs.
    assert "require_noeviction = yes" in (DEPLOY / "delayer.container.conf").read_text()


def test_every_mounted_file_and_secret_exists_or_is_kept_out_of_git() -> None:
    c = compose()
    declared = c.get("secrets", {})
    for name, service in c["services"].items():
        for m in mounts(service):
            if m[0].startswith("."):
                assert (DEPLOY / m[0]).exists(), f"{name} mounts {m[0]}, which is not in deploy/"
            else:
                assert m[0] in c["volumes"], f"{name}: volume {m[0]} is not declared"
        for secret in service.get("secrets", []):
            assert secret in declared, f"{name}: secret {secret} is not declared"
        for var, value in (service.get("environment") or {}).items():
            if var.endswith("_FILE"):
                secret = str(value).removeprefix("/run/secrets/")
                assert secret in service.get("secrets", []), f"{name}: {var}={value} is not one of its secrets"
    for name, secret in declared.items():
        path = (DEPLOY / secret["file"]).resolve()
        assert path.parent == DEPLOY / "secrets", f"secret {name}: {secret['file']} is not in deploy/secrets"
        ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=REPO).returncode == 0
        assert ignored, f"git would commit the secret {secret['file']}"
    assert "deploy/secrets" in (REPO / ".dockerignore").read_text().split(), "secrets must stay out of the image"


def delayer_config(c: Dict[str, Any], service: str, tmp_path: Path,
                   more: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """`delayer config --json` on the service's mounted file and environment
    (and ``more``), its secrets made here (their compose paths exist only in
    a container)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYER_")}
    for var, value in dict(c["services"][service]["environment"], **(more or {})).items():
        if var.endswith("_FILE"):
            secret = tmp_path / Path(value).name
            secret.write_text("compose-test-secret-0123456789\n")
            value = str(secret)
        env[var] = value
    exe = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
    done = subprocess.run([str(exe), "config", "--json", "-c", str(DEPLOY / "delayer.container.conf")],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == "", f"{service}: {done.stderr}"
    return json.loads(done.stdout)


def test_the_server_and_the_webhook_run_the_image_with_known_keys(tmp_path: Path) -> None:
    c = compose()
    server, webhook = c["services"]["delayer"], c["services"]["webhook"]
    assert (REPO / server["build"]["dockerfile"]).resolve() == REPO / "Containerfile"
    assert (DEPLOY / server["build"]["context"]).resolve() == REPO
    assert webhook["image"] == server["image"] and webhook["command"] == ["webhook"]
    for service in (server, webhook):
        assert ["./delayer.container.conf", "/etc/delayer/delayer.conf", "ro"] in mounts(service)
    known = conf_keys((REPO / "delayer.conf").read_text())
    shipped = conf_keys((DEPLOY / "delayer.container.conf").read_text())
    for section in ("delayer", "redis"):
        assert shipped[section] <= known[section], shipped[section] - known[section]
    for name, service in c["services"].items():
        for var in service.get("environment") or {}:
            if var.startswith("DELAYER_"):
                section, key = env_key(var)
                assert key in known[section], f"{name}: {var} names no [{section}] key of delayer.conf"
    # The server reads the mounted file and this environment as the server
    # would, and runs on them (`delayer config` checks as the server does).
    for name in ("delayer", "webhook"):
        effective = delayer_config(c, name, tmp_path)
        assert effective["file"] == str(DEPLOY / "delayer.container.conf")
        for setting in effective["settings"]:
            var = "DELAYER_" + ("" if setting["section"] == "delayer" else "REDIS_") + setting["key"].upper()
            if var in c["services"][name]["environment"] or var + "_FILE" in c["services"][name]["environment"]:
                assert setting["source"].startswith(f"env {var}"), setting
    # The webhook's example variables (commented out) make its section.
    compose_text = (DEPLOY / "compose.yaml").read_text()
    examples = dict(re.findall(r"(?m)^\s*#\s*(DELAYER_WEBHOOK_\w+):\s*(\S+)$", compose_text))
    assert len(examples) == 2, examples
    settings = delayer_config(c, "webhook", tmp_path, examples)["settings"]
    hook = [s for s in settings if s["section"].startswith("webhook.")]
    assert sorted((s["section"], s["key"], s["source"].split()[0]) for s in hook) == [
        ("webhook.close_order", "secret_file", "env"), ("webhook.close_order", "url", "env")], hook
    # The image's probe and Prometheus find the metrics where they are.
    assert "layout = topic" in (DEPLOY / "delayer.container.conf").read_text()
    assert server["environment"]["DELAYER_METRICS_ADDR"] == "0.0.0.0:9464"
    assert "127.0.0.1:9464:9464" in server["ports"]


def test_prometheus_scrapes_the_server_with_the_alert_rules() -> None:
    c = compose()
    prometheus = c["services"]["prometheus"]
    assert ["./prometheus", "/etc/prometheus", "ro"] in mounts(prometheus)
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == ["delayer:9464"], targets
    assert config["rule_files"] == ["alerts.yml"]



def test_promtool_accepts_prometheus_yml_and_its_alert_rules() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    for rules in config["rule_files"]:
        assert (DEPLOY / "prometheus" / rules).is_file(), f"deploy/prometheus/{rules} is missing"
    # promtool (Debian's prometheus package) checks it as Prometheus would,
    # the rule files included.
    done = subprocess.run(["promtool", "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_grafana_gets_the_prometheus_data_source_and_the_dashboards() -> None:
    c = compose()
    grafana = c["services"]["grafana"]
    provisioning = DEPLOY / "grafana" / "provisioning"
    assert ["./grafana/provisioning", "/etc/grafana/provisioning", "ro"] in mounts(grafana)
    sources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert [(s["type"], s["url"], s["isDefault"]) for s in sources] == [
        ("prometheus", "http://prometheus:9090", True)]
    assert "prometheus" in c["services"] and "prometheus" in grafana["depends_on"]
    providers = yaml.safe_load((provisioning / "dashboards" / "delayer.yml").read_text())["providers"]
    dashboards = [m for m in mounts(grafana) if m[1] == providers[0]["options"]["path"]]
    assert dashboards == [["./grafana", "/var/lib/grafana/dashboards", "ro"]], mounts(grafana)
