"""Checks that a request came from `delayer webhook`, unchanged and recent."""
import hashlib
import hmac
import os
import sys
import time

MAX_AGE = 300  # seconds: an older (or replayed) request is refused


def verify(secret: bytes, timestamp: str, signature: str, body: bytes) -> bool:
    """timestamp, signature: the X-Delayer-Timestamp and X-Delayer-Signature
    headers; body: the raw request body, before any JSON parsing."""
    if not (timestamp.isascii() and timestamp.isdigit()) or abs(time.time() - int(timestamp)) > MAX_AGE:
        return False
    mac = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest("sha256=" + mac.hexdigest(), signature)


if __name__ == "__main__":  # WEBHOOK_SECRET=... python3 verify.py TIMESTAMP SIGNATURE < body
    ok = verify(os.environb[b"WEBHOOK_SECRET"], sys.argv[1], sys.argv[2], sys.stdin.buffer.read())
    print("valid" if ok else "invalid")
    sys.exit(0 if ok else 1)
