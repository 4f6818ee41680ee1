"""The line protocol's loop, shared by the two Python drivers (see ../README.md).

A driver supplies ``handle(request) -> dict`` (the fields of a successful
response besides ``ok``) and ``classify(exception) -> kind or None``; this
module reads one JSON request per line on stdin and writes one JSON response
per line on stdout, flushing after each.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from typing import Any, Callable, Dict, Optional


def options(description: str) -> argparse.Namespace:
    """``--url`` / ``--prefix``, defaulting to env DELAYER_URL / DELAYER_PREFIX."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", default=os.environ.get("DELAYER_URL", "redis://127.0.0.1:6379/0"))
    p.add_argument("--prefix", default=os.environ.get("DELAYER_PREFIX", "delayer:"))
    # A delayer.conf instead of --url/--prefix (sentinel mode, for one).
    p.add_argument("--config", default=os.environ.get("DELAYER_CONFIG"))
    return p.parse_args()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: Optional[str]) -> bytes:
    return base64.b64decode(text or "", validate=True)


def job_json(job_id: str, topic: str, body: bytes, id_bytes: Optional[bytes] = None) -> Dict[str, Any]:
    """A job in a response: ``id_b64`` is the id's exact bytes (any bytes;
    ``id`` is text, not exact for an id that is not UTF-8)."""
    raw = job_id.encode("utf-8", "surrogateescape") if id_bytes is None else id_bytes
    return {"id": job_id, "id_b64": b64(raw), "topic": topic, "body_b64": b64(body)}


def request_id(req: Dict[str, Any], key: str = "id") -> Any:
    """A request's ``id_b64`` (any bytes, as the Python SDK names an id
    that is not UTF-8: surrogate escapes), else its ``id``."""
    if req.get(key + "_b64") is not None:
        return unb64(req[key + "_b64"]).decode("utf-8", "surrogateescape")
    return req.get(key)


def serve(handle: Callable[[Dict[str, Any]], Dict[str, Any]], classify: Callable[[BaseException], Optional[str]]) -> None:
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise TypeError("request must be a JSON object")
            response: Dict[str, Any] = {"ok": True, **handle(request)}
        except Exception as e:  # every failure is an answer, never a crash
            kind = classify(e) or "other"
            response = {"ok": False, "error": f"{kind}: {type(e).__name__}: {e}"}
        out.write(json.dumps(response, ensure_ascii=True) + "\n")
        out.flush()
