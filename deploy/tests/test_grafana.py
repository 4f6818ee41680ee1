"""The Grafana dashboard (deploy/grafana/delayer.json) and the alert rules
(deploy/prometheus/alerts.yml) name only metrics a live server exports, and
the per-topic outcome counters and ready-queue age it exports are right.

A real redis-server and the real ``delayer`` binary (metrics_addr and the
HTTP API on 127.0.0.1), in each layout, with some activity: jobs pushed,
moved, reserved, acked, released, buried and exhausted through the Python
SDK and through the HTTP API, one reservation expired by the server, one
job left waiting in its ready queue. Then every metric name in every panel
and variable query of the dashboard, and in every alert expression, must be
in the live /metrics.

Run from the repository root: .venv/bin/pytest -q deploy/tests/test_grafana.py
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "conformance"))
sys.path.insert(0, str(REPO / "sdk-python" / "src"))

import harness  # noqa: E402
from delayer import Backoff, Delayer  # noqa: E402

PREFIX = "graf:"
TOKEN = "grafana-test-token-0123456789"
#: Series Prometheus itself makes (the scrape's health), not the server.
PROMETHEUS_OWN = {"up"}
#: PromQL words that look like names: functions, aggregations, keywords.
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "rate", "increase", "irate", "delta", "histogram_quantile",
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
    "absent", "label_values", "topk", "bottomk", "clamp_min", "clamp_max", "offset", "inf", "nan",
}


def metric_names(expr: str) -> Set[str]:
    """The metric names a PromQL expression (or a label_values() query) reads."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\$\{?\w+\}?", "", text)  # dashboard variables
    text = re.sub(r"(label_values\(\s*[a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)", r"\1)", text)  # its label
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][\w:]*", text):
        word, after = m.group(0), text[m.end():].lstrip()
        if word in PROMQL_WORDS or after.startswith("(") or re.fullmatch(r"\d.*", word):
            continue
        names.add(word)
    return names


def dashboard_exprs() -> List[str]:
    dash = json.loads((REPO / "deploy" / "grafana" / "delayer.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def alert_exprs() -> List[str]:
    # A YAML parser is not needed for the one shape alerts.yml has: "expr: <one line>".
    lines = (REPO / "deploy" / "prometheus" / "alerts.yml").read_text().splitlines()
    return [line.split("expr:", 1)[1].strip() for line in lines if line.strip().startswith("expr:")]


def test_the_name_extraction_reads_promql_as_prometheus_does() -> None:
    expr = ('histogram_quantile(0.99, sum by (le, instance) (rate(delayer_lateness_seconds_bucket'
            '{job="delayer", topic=~"$topic"}[$__rate_interval]))) > 5 or up{job="x"} == 0')
    assert metric_names(expr) == {"delayer_lateness_seconds_bucket", "up"}
    assert metric_names("label_values(delayer_jobs, topic)") == {"delayer_jobs"}
    assert len(dashboard_exprs()) >= 16 and len(alert_exprs()) >= 8


def scrape(port: int) -> Dict[str, float]:
    """The live /metrics: each sample (name with labels, as written) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    return samples


def names_of(samples: Dict[str, float]) -> Set[str]:
    return {series.split("{", 1)[0] for series in samples}


def api(port: int, path: str, body: Dict[str, Any]) -> Dict[str, Any]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        answer: Dict[str, Any] = json.loads(resp.read())
        return answer


class Live:
    def __init__(self, tmp: Path, layout: str) -> None:
        self.layout = layout
        self.redis = harness.RedisServer(tmp)
        self.metrics_port, self.http_port = harness.free_port(), harness.free_port()
        extra = (f"metrics_addr = 127.0.0.1:{self.metrics_port}\nhttp_addr = 127.0.0.1:{self.http_port}\n"
                 f"http_token = {TOKEN}\n")
        self.server = harness.DelayerServer(tmp, self.redis, PREFIX, 100, layout, extra)
        self.rds = self.redis.client()
        self.sdk = Delayer(self.redis.url, prefix=PREFIX, layout=layout)

    def outcomes_key(self, topic: str) -> str:
        return PREFIX + ("{" + topic + "}:outcomes" if self.layout == "topic" else "outcomes")

    def bucket(self, topic: str, job_id: str) -> str:
        return PREFIX + ("{" + topic + "}:job:" if self.layout == "topic" else "job_bucket:") + job_id

    def stop(self) -> None:
        self.sdk.close()
        self.rds.close()
        self.server.stop()
        self.redis.stop()


def sample(samples: Dict[str, float], name: str, topic: str) -> float:
    return samples.get(f'{name}{{topic="{topic}"}}', -1.0)


def wait_for(check: Any, what: str, port: int) -> Dict[str, float]:
    """Polls /metrics until ``check(samples)`` holds (the gauges are read every 5 s)."""
    deadline = time.monotonic() + 20
    while True:
        samples = scrape(port)
        if check(samples):
            return samples
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not in /metrics within 20 s: " +
                        json.dumps({k: v for k, v in samples.items() if "topic=" in k}, indent=1))
        time.sleep(0.2)


@pytest.fixture(scope="module", params=["classic", "topic"])
def live(request: Any, tmp_path_factory: Any) -> Iterator[Live]:
    env = Live(tmp_path_factory.mktemp(request.param), request.param)
    try:
        yield env
    finally:
        env.stop()


def reserve(live: Live, topic: str, ttr: float = 30) -> Any:
    deadline = time.monotonic() + 10
    while (job := live.sdk.reserve(topic, ttr)) is None:
        assert time.monotonic() < deadline, f"nothing to reserve on {topic}"
        time.sleep(0.02)
    return job


def test_outcomes_ready_age_and_every_named_metric_are_exported(live: Live) -> None:
    # Through the SDK: ack, a retry, a bury, and a job out of attempts.
    # (Ids are global in the classic layout: each topic has its own.)
    for job_id in ("s-a1", "s-a2", "s-a3", "s-r", "s-b"):
        live.sdk.push("sdk", job_id, 0)
    live.sdk.push("sdk", "s-x", 0, max_attempts=1)
    for _ in range(6):
        job = reserve(live, "sdk")
        if job.id.startswith("s-a"):
            assert live.sdk.ack(job) is True
        elif job.id == "s-b":
            assert live.sdk.bury(job, error="E: no") is True
        else:
            assert live.sdk.release(job, 60) is True
    # Through the HTTP API.
    for job_id in ("h-a", "h-r", "h-b"):
        live.sdk.push("http", job_id, 0)
    for _ in range(3):
        job = None
        while job is None:
            job = api(live.http_port, "/v1/topics/http/reserve", {"ttr": 30, "wait": 5})["job"]
        path = f"/v1/topics/http/jobs/{job['id']}/"
        verb, body = {"h-a": ("ack", {}), "h-b": ("bury", {"error": "E: no"})}.get(job["id"], ("release", {"delay": 60}))
        assert list(api(live.http_port, path + verb, {"receipt": job["receipt"], **body}).values()) == [True]
    # The server's expiry: retried once, then dead.
    live.sdk.push("expiry", "e", 0, max_attempts=2, backoff=Backoff.fixed(0.05))
    reserve(live, "expiry", 0.1)
    reserve(live, "expiry", 0.1)
    # A job left ready; its due time a known 100 s ago (the bucket's due field).
    live.sdk.push("aging", "old", 0)
    assert harness.wait_until(lambda: live.rds.llen(PREFIX + ("{aging}:ready" if live.layout == "topic"
                                                               else "ready_queue:aging")) == 1)
    live.rds.hset(live.bucket("aging", "old"), "due", f"{time.time() - 100:.3f}")

    def counted(s: Dict[str, float]) -> bool:
        want = {("sdk", "acked"): 3, ("sdk", "released"): 1, ("sdk", "buried"): 1, ("sdk", "dead_lettered"): 2,
                ("http", "acked"): 1, ("http", "released"): 1, ("http", "buried"): 1, ("http", "dead_lettered"): 1,
                ("expiry", "released"): 1, ("expiry", "dead_lettered"): 1}
        return (all(sample(s, f"delayer_jobs_{k}_total", t) == n for (t, k), n in want.items())
                and sample(s, "delayer_ready_age_seconds", "aging") >= 100
                and sample(s, "delayer_ready_age_seconds", "sdk") == 0)

    samples = wait_for(counted, "the outcome counters and the ready-queue age", live.metrics_port)
    assert sample(samples, "delayer_ready_age_seconds", "aging") < 200

    exported = names_of(samples)
    for where, exprs in (("deploy/grafana/delayer.json", dashboard_exprs()),
                         ("deploy/prometheus/alerts.yml", alert_exprs())):
        for expr in exprs:
            missing = metric_names(expr) - exported - PROMETHEUS_OWN
            assert not missing, f"{where}: {expr!r} names {sorted(missing)}, which the server does not export"

    # Redis loses the counts (a flush): the exported counter goes on from
    # where it was, with what Redis counts from then on (a total that went
    # down is a reset, as Prometheus takes a counter that goes down).
    live.rds.delete(live.outcomes_key("sdk"))
    live.sdk.push("sdk", "s-a4", 0)
    assert live.sdk.ack(reserve(live, "sdk")) is True
    wait_for(lambda s: sample(s, "delayer_jobs_acked_total", "sdk") == 4, "the acked count after a reset",
             live.metrics_port)

    # Lost again, and counted back up to the very total last seen before a
    # read shows it: the server has seen the hash gone, so the new total
    # counts in full (it used to hide below the old one: 0 counted).
    live.rds.delete(live.outcomes_key("sdk"))
    for marker in ("marker-1", "marker-2"):
        # A job of a new topic shows in the per-topic gauges once a read
        # began after it; the second marker proves the read of the first
        # (stats, then the counts) ended.
        live.sdk.push(marker, "m", 3600)
        wait_for(lambda s: any(k.startswith("delayer_jobs{") and f'topic="{marker}"' in k and v >= 1
                               for k, v in s.items()), f"{marker} in the per-topic gauges", live.metrics_port)
    live.rds.hset(live.outcomes_key("sdk"), "acked:sdk", 1)
    wait_for(lambda s: sample(s, "delayer_jobs_acked_total", "sdk") == 5, "the acked count after a second loss",
             live.metrics_port)


def test_odd_outcome_keys_and_due_fields_skip_the_count_and_are_named(live: Live) -> None:
    """A wrong-typed outcomes hash costs its counts only (the scripts skip
    the count; the ack and the bury still end their jobs); a due field that
    is no time leaves the age unknown. The server names each key in its log."""
    key = live.outcomes_key("odd")
    live.rds.set(key, "not a hash")
    try:
        live.sdk.push("odd", "o-1", 0)
        live.sdk.push("odd", "o-2", 0)
        assert live.sdk.ack(reserve(live, "odd")) is True
        assert live.sdk.bury(reserve(live, "odd")) is True
        assert live.rds.get(key) == b"not a hash"
        live.sdk.push("odd", "o-3", 0)
        assert harness.wait_until(lambda: live.rds.llen(PREFIX + ("{odd}:ready" if live.layout == "topic"
                                                                   else "ready_queue:odd")) == 1)
        live.rds.hset(live.bucket("odd", "o-3"), "due", "abc")
        named = lambda: key in live.server.log.read_text() and live.bucket("odd", "o-3") in live.server.log.read_text()
        assert harness.wait_until(named, deadline=20), harness.tail(live.server.log)
        assert "panicked" not in live.server.log.read_text()
    finally:
        live.rds.delete(key)
