"""The three SDKs refuse the same bad input, with their invalid-argument
error, before touching Redis; and accept the same edge-of-valid input, among
it every non-empty id and topic (as Delayer 1.x did).
(raw1x is left out: Delayer 1.x validated nothing but emptiness.)
In the per-topic layout (CONFORMANCE_LAYOUT=topic) a topic with a brace is
refused alike instead (PROTOCOL.md, "The per-topic layout").
"""

from __future__ import annotations

import base64
import uuid
from typing import Any, Dict

import pytest

from conftest import LAYOUT

SDKS = ["rust", "python", "php"]
MAX_DELAY_MS = 315_360_000 * 1000  # 10 years
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _push(**over: Any) -> Dict[str, Any]:
    req: Dict[str, Any] = {"op": "push", "topic": "cf-reject", "id": "cf-reject:" + uuid.uuid4().hex,
                           "delay_ms": 60_000, "body_b64": base64.b64encode(b"x").decode()}
    req.update(over)
    return req


# (name, request). Rust's SDK takes std::time::Duration, which cannot hold a
# negative value: for the cases marked NEGATIVE the Rust driver itself answers
# invalid_argument (the call cannot be written), and the test checks that.
NEGATIVE = {"negative delay", "negative ready_max_lifetime", "negative bpop timeout"}
BAD = [
    ("empty id", _push(id="")),
    ("empty topic", _push(topic="")),
    ("negative delay", _push(delay_ms=-1000)),
    ("delay over 10 years", _push(delay_ms=MAX_DELAY_MS + 1)),
    ("ready_max_lifetime 0", _push(ready_max_lifetime_s=0)),
    ("ready_max_lifetime 1.5 s", _push(ready_max_lifetime_s=1.5)),
    ("negative ready_max_lifetime", _push(ready_max_lifetime_s=-60)),
    ("ready_max_lifetime over 10 years", _push(ready_max_lifetime_s=315_360_001)),
    ("pop: empty topic", {"op": "pop", "topic": ""}),
    ("bpop: empty topic", {"op": "bpop", "topic": "", "timeout_ms": 100}),
    ("negative bpop timeout", {"op": "bpop", "topic": "cf-reject", "timeout_ms": -1000}),
    ("remove: empty id", {"op": "remove", "id": "", **({"topic": "cf-reject"} if LAYOUT == "topic" else {})}),
    ("traceparent in upper case", _push(traceparent=TRACEPARENT.upper())),
    ("traceparent of version 01", _push(traceparent="01" + TRACEPARENT[2:])),
    ("traceparent with a zero trace id", _push(traceparent="00-" + "0" * 32 + TRACEPARENT[35:])),
    ("traceparent with a zero span id", _push(traceparent=TRACEPARENT[:36] + "0" * 16 + "-01")),
    ("traceparent cut short", _push(traceparent=TRACEPARENT[:-1])),
]

# Names 1.x accepted: any non-empty string (docs/PROTOCOL.md, "Input rules").
GOOD = [
    ("id with a space", _push(id="a b")),
    ("id with a tab", _push(id="a\tb")),
    ("id with a newline", _push(id="a\nb")),
    ("id with U+00A0", _push(id="a\u00a0b")),
    ("id with U+0085", _push(id="a\u0085b")),
    ("id with U+3000", _push(id="a\u3000b")),
    ("id with U+2028", _push(id="a\u2028b")),
    ("id with DEL and NUL", _push(id="a\x7f\x00b")),
    ("id with {", _push(id="order{1")),
    ("id with }", _push(id="order}1")),
    ("id that is a hash tag", _push(id="{order}")),
    ("201-byte id", _push(id="x" * 201)),
    ("300-byte UTF-8 id", _push(id="延" * 100)),
    ("64 KiB id", _push(id="k" * 65536)),
    ("only digits, as 1.x writes an integer id", _push(id="20111")),
    ("only a space", _push(id=" ")),
    ("topic with a space", _push(topic="close order")),
    ("201-byte topic", _push(topic="t" * 201)),
    ("200-byte id", _push(id="x" * 200)),
    ("id with U+200B", _push(id="a\u200bb")),
    ("unicode id and topic", _push(id="订单-1:" + uuid.uuid4().hex, topic="主题")),
    ("delay exactly 10 years", _push(delay_ms=MAX_DELAY_MS)),
    ("ready_max_lifetime 1 s", _push(ready_max_lifetime_s=1)),
    ("ready_max_lifetime 60.0 s", _push(ready_max_lifetime_s=60.0)),
    ("ready_max_lifetime exactly 10 years", _push(ready_max_lifetime_s=315_360_000)),
    ("a traceparent", _push(traceparent=TRACEPARENT)),
    ("ids not all zeros", _push(traceparent="00-" + "0" * 31 + "1-" + "0" * 15 + "1-00")),
]

# Good in the classic layout; the per-topic layout cannot name it (the brace
# would move the hash tag), so there every SDK refuses it.
BRACED = [("topic with {", _push(topic="{t}")), ("topic with }", _push(topic="t}"))]
(BAD if LAYOUT == "topic" else GOOD).extend(BRACED)


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("case,req", BAD, ids=[c for c, _ in BAD])
def test_rejected_alike(drivers: Any, rds: Any, keys: Any, sdk: str, case: str, req: Dict[str, Any]) -> None:
    pool = keys.pool_of(req.get("topic", "cf-reject"))
    pool_before = rds.zcard(pool)
    r = drivers[sdk].request(req)
    assert r["ok"] is False, f"{sdk} accepted {case}: {r}"
    kind, _, message = r["error"].partition(": ")
    assert kind == "invalid_argument", f"{sdk} refused {case} with {r['error']!r}, not invalid_argument"
    if sdk == "rust" and case in NEGATIVE:
        assert message.startswith("driver:"), message
    if req["op"] == "push" and req["id"]:
        assert rds.zscore(pool, req["id"]) is None, f"{sdk} wrote {case} to the pool"
        assert rds.exists(keys.bucket(req["id"], req["topic"])) == 0, f"{sdk} wrote a bucket for {case}"
    assert rds.zcard(pool) == pool_before


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("case,req", GOOD, ids=[c for c, _ in GOOD])
def test_accepted_alike(drivers: Any, rds: Any, keys: Any, sdk: str, case: str, req: Dict[str, Any]) -> None:
    req = dict(req, id=req["id"] + f"-{sdk}")
    r = drivers[sdk].request(req)
    assert r["ok"] is True, f"{sdk} refused {case}: {r['error']}"
    try:
        assert rds.zscore(keys.pool_of(req["topic"]), req["id"]) is not None
    finally:
        r = drivers[sdk].request({"op": "remove", "id": req["id"], **keys.named(req["topic"])})
        assert r == {"ok": True, "removed": True}, r
