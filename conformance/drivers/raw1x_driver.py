"""A Delayer 1.x client, reproduced with raw Redis commands, behind the
conformance line protocol.

It does exactly what mix/delayer-client 1.x does (no Lua, the client's clock,
whole seconds):

  push:   MULTI; HMSET <p>job_bucket:<id> topic <t> body <b>;
          EXPIRE <p>job_bucket:<id> <delay + ready_max_lifetime>;
          ZADD <p>job_pool <int(time.time()) + delay> <id>; EXEC
  pop:    RPOP <p>ready_queue:<topic>; HGETALL <p>job_bucket:<id>;
          DEL <p>job_bucket:<id>  (an empty hash: the answer is null)
  bpop:   BRPOP <p>ready_queue:<topic> <timeout>, then as pop
  remove: MULTI; ZREM <p>job_pool <id>; DEL <p>job_bucket:<id>; EXEC

1.x had whole-second delays only, so delay_ms is rounded up to seconds, and
BRPOP's timeout too (1.x sent whole seconds; 0 would mean forever, so at
least 1). 1.x validated nothing: there is no invalid_argument here. The
prefix is a parameter (1.x hard-coded "delayer:", the suite's default).

Usage: raw1x_driver.py --url redis://127.0.0.1:PORT/0 --prefix delayer:
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _lineproto import job_json, options, serve, unb64  # noqa: E402

import redis  # noqa: E402

DEFAULT_READY_MAX_LIFETIME = 604800


def main() -> None:
    opts = options(__doc__ or "")
    r = redis.Redis.from_url(opts.url, decode_responses=False)
    p = opts.prefix
    pool = p + "job_pool"

    def bucket(job_id: bytes) -> bytes:
        return p.encode("utf-8") + b"job_bucket:" + job_id

    def request_id(req: Dict[str, Any]) -> bytes:
        """The id as bytes: ``id_b64`` (1.x wrote any bytes), else ``id``."""
        return unb64(req["id_b64"]) if req.get("id_b64") is not None else req["id"].encode("utf-8")

    def finish(job_id: bytes) -> Any:
        key = bucket(job_id)
        data = r.hgetall(key)
        r.delete(key)
        if not data:
            return None
        text = job_id.decode("utf-8", "surrogateescape")
        topic = data.get(b"topic", b"").decode("utf-8", "surrogateescape")
        return job_json(text, topic, data.get(b"body", b""), job_id)

    def handle(req: Dict[str, Any]) -> Dict[str, Any]:
        op = req.get("op")
        if op == "push":
            delay = math.ceil(req["delay_ms"] / 1000)
            life = req.get("ready_max_lifetime_s") or DEFAULT_READY_MAX_LIFETIME
            job_id = request_id(req)
            key = bucket(job_id)
            pipe = r.pipeline(transaction=True)  # MULTI ... EXEC
            pipe.execute_command("HMSET", key, "topic", req["topic"], "body", unb64(req.get("body_b64")))
            pipe.expire(key, int(delay + life))
            pipe.zadd(pool, {job_id: int(time.time()) + delay})
            pipe.execute()
            return {}
        if op == "pop":
            job_id = r.rpop(p + "ready_queue:" + req["topic"])
            return {"job": None if job_id is None else finish(job_id)}
        if op == "bpop":
            timeout = max(1, math.ceil(req["timeout_ms"] / 1000)) if req["timeout_ms"] > 0 else 0
            got = r.brpop([p + "ready_queue:" + req["topic"]], timeout=timeout)
            return {"job": None if got is None else finish(got[1])}
        if op == "remove":
            job_id = request_id(req)
            pipe = r.pipeline(transaction=True)
            pipe.zrem(pool, job_id)
            pipe.delete(bucket(job_id))
            zrem, deleted = pipe.execute()
            # 1.x's remove() returned the transaction's success; "removed"
            # here means something was cancelled, as in the SDKs.
            return {"removed": bool(zrem or deleted)}
        raise ValueError(f"unknown op {op!r}")

    def classify(e: BaseException) -> Optional[str]:
        if isinstance(e, (redis.ConnectionError, redis.TimeoutError)):
            return "connection"
        return "other"

    serve(handle, classify)


if __name__ == "__main__":
    main()
