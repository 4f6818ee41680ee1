"""Credentials against the real server: wrong tokens and sign-ins are limited
per client address with 429 and Retry-After, and logged with the address a
bounded number of times (limiter.rs); the dashboard's cookie holds a signed
session that ends, keeps its access and dies at sign-out (session.rs).

The server believes X-Forwarded-For from loopback (conftest.TRUSTED), so
each test is a client address of its own."""

from __future__ import annotations

from typing import Dict

from conftest import READ_TOKEN, TOKEN, HttpServer, request, sign_in


def client(address: str) -> Dict[str, str]:
    return {"X-Forwarded-For": address}


def test_wrong_tokens_and_sign_ins_are_limited_per_address(server: HttpServer) -> None:
    attacker, bystander = "203.0.113.7", "203.0.113.8"
    statuses = [request(server.base, "GET", "/v1/stats", token=f"guess-{i:016d}", headers=client(attacker))[0]
                for i in range(300)]
    assert statuses[:10] == [401] * 10 and set(statuses[10:]) == {429}, statuses[:20]
    status, data, headers = request(server.base, "GET", "/v1/stats", token="guess-again-0000", headers=client(attacker))
    assert (status, data["error"]["code"]) == (429, "too_many_attempts")
    assert 1 <= int(headers["retry-after"]) <= 6
    # While limited, even the right token is refused from there (else the
    # guessing would go on, told apart by the answer), the sign-in too.
    assert request(server.base, "GET", "/v1/stats", headers=client(attacker))[0] == 429
    status, value, headers = sign_in(server.base, TOKEN, headers=client(attacker))
    assert (status, value) == (429, "") and "retry-after" in headers
    # Another address is not slowed down.
    assert request(server.base, "GET", "/v1/stats", headers=client(bystander))[0] == 200

    # Sign-ins are counted the same way.
    guesser = "203.0.113.9"
    statuses = [sign_in(server.base, f"guess-{i:016d}", headers=client(guesser))[0] for i in range(30)]
    assert statuses[:10] == [401] * 10 and set(statuses[10:]) == {429}, statuses
    # Each address is in the log, once or twice, not once per attempt.
    log = server.log_text()
    for address, attempts in ((attacker, 303), (guesser, 30)):
        lines = [line for line in log.splitlines() if f"wrong credentials from {address}" in line]
        assert 1 <= len(lines) <= 2, (address, lines)
        assert attempts > 10 * len(lines)
    assert "sign-in was refused" not in log


def test_the_session_cookie_is_signed_ends_and_keeps_its_access(server: HttpServer) -> None:
    me = client("198.51.100.1")
    status, full, headers = sign_in(server.base, TOKEN, headers=me)
    assert status == 303 and full and TOKEN not in headers["set-cookie"]
    assert "Max-Age=43200" in headers["set-cookie"] and "Secure" not in headers["set-cookie"]

    def stats(value: str) -> int:
        return request(server.base, "GET", "/v1/stats", token=None, headers=dict(me, Cookie=f"delayer_session={value}"))[0]

    assert stats(full) == 200
    # A changed session, or the token itself as the cookie (as before), is refused.
    payload, mac = full.rsplit(".", 1)
    assert stats(payload + "." + ("0" if mac[0] != "0" else "1") + mac[1:]) == 401
    assert stats(full.replace(".f.", ".r.")) == 401
    assert stats(TOKEN) == 401

    # The read-only token's session stays read-only.
    read = sign_in(server.base, READ_TOKEN, headers=me)[1]
    assert stats(read) == 200
    write = dict(me, Cookie=f"delayer_session={read}", **{"X-Delayer-Dashboard": "1"})
    status, data, _ = request(server.base, "POST", "/v1/topics/session-t/jobs", {"id": "a", "delay": 60}, token=None,
                              headers=write)
    assert (status, data["error"]["code"]) == (403, "read_only")

    # Sign-out ends the session here, not only in the browser.
    form = dict(me, Cookie=f"delayer_session={full}", **{"Content-Type": "application/x-www-form-urlencoded"})
    status, _, headers = request(server.base, "POST", "/signout", token=None, headers=form, raw=b"")
    assert status == 303 and "Max-Age=0" in headers["set-cookie"]
    assert stats(full) == 401 and stats(read) == 200


def test_the_cookie_is_secure_behind_a_trusted_https_proxy(server: HttpServer) -> None:
    proxied = {"X-Forwarded-For": "198.51.100.2", "X-Forwarded-Proto": "https"}
    status, _, headers = sign_in(server.base, TOKEN, headers=proxied)
    assert status == 303 and headers["set-cookie"].endswith("; Secure"), headers["set-cookie"]
