"""The Python SDK (package ``delayer``) behind the conformance line protocol.

Usage: python_driver.py --url redis://127.0.0.1:PORT/0 --prefix delayer:
(or env DELAYER_URL / DELAYER_PREFIX). See ../README.md for the protocol.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _lineproto import b64, job_json, options, request_id, serve, unb64  # noqa: E402

import delayer  # noqa: E402


def seconds(ms: Any) -> Any:
    """Milliseconds from a request as the SDK's seconds.

    Whole seconds stay exact ints; anything but a number is passed on as is,
    for the SDK to refuse.
    """
    if isinstance(ms, bool) or not isinstance(ms, (int, float)):
        return ms
    return ms // 1000 if isinstance(ms, int) and ms % 1000 == 0 else ms / 1000


def backoff(spec: Any) -> delayer.Backoff:
    """push's ``"backoff"``: {"kind":"fixed","delay_ms":N} or {"kind":"exponential","base_ms":N,"max_ms":N}."""
    if not isinstance(spec, dict):
        raise ValueError(f"backoff must be an object, not {spec!r}")
    if spec.get("kind") == "fixed":
        return delayer.Backoff.fixed(seconds(spec["delay_ms"]))
    if spec.get("kind") == "exponential":
        return delayer.Backoff.exponential(seconds(spec["base_ms"]), seconds(spec["max_ms"]))
    raise ValueError(f"unknown backoff kind {spec.get('kind')!r}")


#: The fields of the "job" op's answer (README: the lookup of issue 13; ``flow``, "paused", "limited" or "": issue 23).
JOB_FIELDS = ("id", "state", "topic", "body_size", "attempts", "max_attempts", "due", "deadline", "dead_at",
              "dead_reason", "last_error", "traceparent", "flow")


def main() -> None:
    opts = options(__doc__ or "")
    client = delayer.Delayer.from_config(opts.config) if opts.config else delayer.Delayer(opts.url, prefix=opts.prefix)

    def message(m: Optional[delayer.Message]) -> Any:
        return None if m is None else {**job_json(m.id, m.topic, m.body, m.id_bytes), "traceparent": m.traceparent}

    def reserved(m: Optional[delayer.ReservedMessage]) -> Any:
        if m is None:
            return None
        return {
            **job_json(m.id, m.topic, m.body, m.id_bytes),
            "attempts": m.attempts,
            "max_attempts": m.max_attempts,
            "receipt": m.receipt,
            "deadline": m.deadline,
            "traceparent": m.traceparent,
        }

    def held(req: Dict[str, Any]) -> Dict[str, Any]:
        # With a receipt: that reservation only; null: whichever is current.
        receipt = req.get("receipt")
        return {**({} if receipt is None else {"receipt": receipt}), **topic(req)}

    def topic(req: Dict[str, Any]) -> Dict[str, Any]:
        # The optional "topic" of the id-only ops: the per-topic layout needs it.
        return {} if req.get("topic") is None else {"topic": req["topic"]}

    def dead_letter(x: delayer.DeadLetter) -> Dict[str, Any]:
        return {
            "id": x.id,
            "id_b64": b64(x.id_bytes),
            "topic": x.topic,
            "body_b64": b64(x.body),
            "attempts": x.attempts,
            "reason": x.reason,
            "dead_at": x.dead_at,
            "last_error": x.last_error,
        }

    def ids(req: Dict[str, Any]) -> Any:
        # "ids_b64": ids as bytes (any), named as the SDK names them (surrogate escapes).
        if req.get("ids_b64") is not None:
            return [unb64(i).decode("utf-8", "surrogateescape") for i in req["ids_b64"]]
        return req.get("ids")

    def limit(rate: Optional[delayer.RateLimit]) -> Dict[str, Any]:
        # A topic's rate limit in every driver's shape: null and null without one.
        return {"per_second": None if rate is None else rate.per_second, "burst": None if rate is None else rate.burst}

    def flow(state: delayer.FlowState, changed: bool = True) -> Dict[str, Any]:
        # The flow op's answer ("changed" only for a call that may change the state: set_rate_limit).
        answer = {"paused_since": state.paused_since, "held": state.held, **limit(state.rate_limit)}
        return {**answer, "changed": state.changed} if changed else answer

    def handle(req: Dict[str, Any]) -> Dict[str, Any]:
        op = req.get("op")
        if op == "push":
            kwargs: Dict[str, Any] = {}
            if req.get("ready_max_lifetime_s") is not None:
                kwargs["ready_max_lifetime"] = req["ready_max_lifetime_s"]
            if req.get("max_attempts") is not None:
                kwargs["max_attempts"] = req["max_attempts"]
            if req.get("backoff") is not None:
                kwargs["backoff"] = backoff(req["backoff"])
            if req.get("traceparent") is not None:
                kwargs["traceparent"] = req["traceparent"]
            delay = seconds(req["delay_ms"])
            try:
                due = client.push(
                    req["topic"], request_id(req), delay, unb64(req.get("body_b64")),
                    if_absent=bool(req.get("if_absent")), **kwargs,
                )
            except delayer.IdTakenError as e:
                return {"taken": {"topic": e.taken[0].topic, "due": e.taken[0].due}}
            return {"due": due}
        if op == "push_many":
            jobs = [
                delayer.Job(j["topic"], request_id(j), seconds(j["delay_ms"]), unb64(j.get("body_b64")),
                            traceparent=j.get("traceparent"))
                for j in req["jobs"]
            ]
            try:
                dues = client.push_many(jobs, if_absent=bool(req.get("if_absent")))
                return {"due": dues, "taken": []}
            except delayer.IdTakenError as e:
                taken = [{"id": t.id, "topic": t.topic, "due": t.due} for t in e.taken]
                return {"due": e.due, "taken": taken}
        if op == "pop":
            return {"job": message(client.pop(req["topic"]))}
        if op == "bpop":
            return {"job": message(client.bpop(req["topic"], req["timeout_ms"] / 1000))}
        if op == "remove":
            return {"removed": client.remove(request_id(req), **topic(req))}
        if op == "reserve":
            return {"job": reserved(client.reserve(req["topic"], seconds(req["ttr_ms"])))}
        if op == "breserve":
            job = client.breserve(req["topic"], seconds(req["ttr_ms"]), req["timeout_ms"] / 1000)
            return {"job": reserved(job)}
        if op == "ack":
            return {"done": client.ack(request_id(req), **held(req))}
        if op == "touch":
            return {"deadline": client.touch(request_id(req), seconds(req["ttr_ms"]), **held(req))}
        if op == "release":
            delay_ms = req.get("delay_ms")
            return {"done": client.release(request_id(req), None if delay_ms is None else seconds(delay_ms), **held(req))}
        if op == "bury":
            return {"done": client.bury(request_id(req), **held(req))}
        if op == "reschedule":
            return {"due": client.reschedule(req["id"], seconds(req["delay_ms"]), **topic(req))}
        if op == "dead_list":
            return {"dead": [dead_letter(x) for x in client.dead_letters(req["topic"], req["start"], req["count"])]}
        if op == "requeue_dead":
            return {"count": client.requeue_dead(req["topic"], ids(req))}
        if op == "purge_dead":
            return {"count": client.purge_dead(req["topic"], ids(req))}
        if op == "pause":
            return {"changed": client.pause(req["topic"])}
        if op == "resume":
            return {"changed": client.resume(req["topic"])}
        if op == "is_paused":
            return {"paused": client.is_paused(req["topic"])}
        if op == "flow":
            return flow(client.flow(req["topic"]), changed=False)
        if op == "set_rate_limit":
            # per_second and burst passed on as JSON gave them: the SDK (and flow.lua) judge them
            return flow(client.set_rate_limit(req["topic"], req["per_second"], req.get("burst")))
        if op == "clear_rate_limit":
            return {"changed": client.clear_rate_limit(req["topic"])}
        if op == "stats":
            # per topic as Delayer.stats() has it, the pause and limit as the flow op answers them
            stats = client.stats()
            return {"scheduled_total": stats.scheduled_total, "reserved_total": stats.reserved_total,
                    "topics": [{"topic": t.topic, "scheduled": t.scheduled, "ready": t.ready, "reserved": t.reserved,
                                "dead": t.dead, "paused": t.paused, "paused_since": t.paused_since, "held": t.held,
                                **limit(t.rate_limit)} for t in stats.topics]}
        if op == "job":
            info = client.job(req["topic"], request_id(req))
            job = {k: getattr(info, k) for k in JOB_FIELDS}
            raw = info.id.encode("utf-8", "surrogateescape")
            if raw != info.id.encode("utf-8", "replace"):  # not UTF-8: `delayer job --json`'s id_base64
                del job["id"]
                job["id_base64"] = b64(raw)
            return {"job": job}
        if op == "read_config":
            settings = delayer.config.load(req["path"])
            if settings.cluster:  # checked; a cluster client would connect now, to read the slot table
                return {"prefix": settings.key_prefix}
            return {"prefix": delayer.Delayer.from_config(req["path"]).keys.prefix}
        raise ValueError(f"unknown op {op!r}")

    def classify(e: BaseException) -> Optional[str]:
        if isinstance(e, delayer.InvalidArgument):
            return "invalid_argument"
        if isinstance(e, delayer.ConnectionFailed):
            return "connection"
        if isinstance(e, delayer.ConfigError):
            return "config"
        return "other"

    serve(handle, classify)


if __name__ == "__main__":
    main()
