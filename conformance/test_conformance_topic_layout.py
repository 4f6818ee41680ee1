"""What only the per-topic layout has (CONFORMANCE_LAYOUT=topic; skipped in
the classic run): ids are per topic whoever pushes and pops, the server
indexes what every SDK pushes (its earliest due time, the topic known), and
all three refuse alike a topic with a brace and the id-only calls without
their topic.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest

from conftest import LAYOUT, PREFIX
from harness import ok, wait_until

SDKS = ["rust", "python", "php"]
_SESSION = uuid.uuid4().hex[:8]

pytestmark = pytest.mark.skipif(LAYOUT != "topic", reason="the per-topic layout only (CONFORMANCE_LAYOUT=topic)")


@pytest.fixture(scope="module", autouse=True)
def _server_running(delayer_server: Any) -> None:
    """The real server moves every job here."""


def topic(*parts: str) -> str:
    return "tl-" + _SESSION + "-" + "-".join(parts)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.mark.parametrize("sdk", SDKS)
def test_the_same_id_on_two_topics_is_two_jobs(drivers: Any, sdk: str) -> None:
    other = SDKS[(SDKS.index(sdk) + 1) % 3]
    a, b = topic("same-id", sdk, "a"), topic("same-id", sdk, "b")
    ok(drivers, sdk, {"op": "push", "topic": a, "id": "1", "delay_ms": 0, "body_b64": b64(b"to a")})
    ok(drivers, other, {"op": "push", "topic": b, "id": "1", "delay_ms": 0, "body_b64": b64(b"to b")})
    for t, body in ((a, b"to a"), (b, b"to b")):
        job = ok(drivers, sdk, {"op": "bpop", "topic": t, "timeout_ms": 10_000}, timeout=40)["job"]
        assert job is not None and job["id"] == "1", f"{sdk} got {job} from {t}"
        assert base64.b64decode(job["body_b64"]) == body, f"{t}: another topic's job"


@pytest.mark.parametrize("sdk", SDKS)
def test_the_server_indexes_what_every_sdk_pushes(drivers: Any, rds: Any, sdk: str) -> None:
    t = topic("index", sdk)
    ok(drivers, sdk, {"op": "push", "topic": t, "id": "later", "delay_ms": 600_000})
    ok(drivers, sdk, {"op": "push", "topic": t, "id": "sooner", "delay_ms": 300_000})
    due = rds.zscore(f"{PREFIX}{{{t}}}:pool", "sooner")
    assert due is not None, f"{sdk} did not write the topic's pool"
    # The scripts announce, the server writes its index (PROTOCOL.md, "The
    # per-topic layout"): the earliest due time (never later; an older SDK's
    # own write may still be up to 100 ms early), and the topic known.

    def indexed() -> bool:
        index = rds.zscore(PREFIX + "due", t)
        return index is not None and due - 1.0 < index <= due + 0.0015 and bool(rds.sismember(PREFIX + "topics", t))

    assert wait_until(indexed), (
        f"after {sdk}'s pushes the index says {rds.zscore(PREFIX + 'due', t)}, not {due}, "
        f"and {t} is{'' if rds.sismember(PREFIX + 'topics', t) else ' not'} in {PREFIX}topics")
    for job_id in ("later", "sooner"):
        assert ok(drivers, sdk, {"op": "remove", "id": job_id, "topic": t})["removed"] is True


BAD = [
    ("a brace in the topic", {"op": "push", "topic": "a{b}", "id": "1", "delay_ms": 0}),
    ("a closing brace", {"op": "reserve", "topic": "a}b", "ttr_ms": 1000}),
    ("remove without its topic", {"op": "remove", "id": "1"}),
    ("reschedule without its topic", {"op": "reschedule", "id": "1", "delay_ms": 0}),
    ("ack without its topic", {"op": "ack", "id": "1", "receipt": None}),
]


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("name,req", BAD, ids=[b[0] for b in BAD])
def test_what_the_layout_cannot_take_is_refused_alike(drivers: Any, rds: Any, sdk: str, name: str,
                                                     req: Any) -> None:
    before = rds.dbsize()
    r = drivers[sdk].request(dict(req))
    assert r["ok"] is False and r["error"].startswith("invalid_argument:"), f"{sdk} {name}: {r}"
    assert "per-topic layout" in r["error"], f"{sdk} {name}: the message names the layout: {r['error']}"
    assert rds.dbsize() == before, f"{sdk} {name}: wrote to Redis"
