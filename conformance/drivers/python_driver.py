"""The Python SDK (package ``delayer``) behind the conformance line protocol.

Usage: python_driver.py --url redis://127.0.0.1:PORT/0 --prefix delayer:
(or env DELAYER_URL / DELAYER_PREFIX). See ../README.md for the protocol.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _lineproto import job_json, options, serve, unb64  # noqa: E402

import delayer  # noqa: E402


def main() -> None:
    opts = options(__doc__ or "")
    client = delayer.Delayer(opts.url, prefix=opts.prefix)

    def message(m: Optional[delayer.Message]) -> Any:
        return None if m is None else job_json(m.id, m.topic, m.body)

    def handle(req: Dict[str, Any]) -> Dict[str, Any]:
        op = req.get("op")
        if op == "push":
            kwargs: Dict[str, Any] = {}
            if req.get("ready_max_lifetime_s") is not None:
                kwargs["ready_max_lifetime"] = req["ready_max_lifetime_s"]
            delay_ms = req["delay_ms"]
            # whole milliseconds stay exact ints; the SDK takes seconds
            delay = delay_ms // 1000 if isinstance(delay_ms, int) and delay_ms % 1000 == 0 else delay_ms / 1000
            due = client.push(req["topic"], req["id"], delay, unb64(req.get("body_b64")), **kwargs)
            return {"due": due}
        if op == "pop":
            return {"job": message(client.pop(req["topic"]))}
        if op == "bpop":
            return {"job": message(client.bpop(req["topic"], req["timeout_ms"] / 1000))}
        if op == "remove":
            return {"removed": client.remove(req["id"])}
        raise ValueError(f"unknown op {op!r}")

    def classify(e: BaseException) -> Optional[str]:
        if isinstance(e, delayer.InvalidArgument):
            return "invalid_argument"
        if isinstance(e, delayer.ConnectionFailed):
            return "connection"
        return "other"

    serve(handle, classify)


if __name__ == "__main__":
    main()
