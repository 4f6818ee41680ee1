"""set_rate_limit and clear_rate_limit (issue 23, design 23 §5: flow.lua's
``limit`` and ``unlimit``), with the sync client, in both layouts: what each
call answers and writes, the refusals (the rules live in flow.lua alone; the
SDK only raises its ``invalid argument`` error as InvalidArgument), and how
stats and job lookup show a limit. How the movers pace jobs is the server's
(no server runs here). The builders, decoders and the error mapping are
tested without Redis at the end."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any, Dict

import pytest
import redis

from delayer import Delayer, FlowState, InvalidArgument, Keys, ProtocolError, RateLimit

from flowkit import P, REFUSED, make_ready, names, d, layout  # noqa: F401 (fixtures)
from test_pause import snapshot
from topickit import WakeListener

#: Types Python refuses before anything is sent (idiomatic type checks, no rule of the script's).
MISTYPED = [
    (10, 1.5, "burst must be an int or None, not float"),
    (10, True, "burst must be an int or None, not bool"),
    (10, "5", "burst must be an int or None, not str"),
    (True, None, "per_second must be an int or float, not bool"),
    ("10", None, "per_second must be an int or float, not str"),
    (Decimal("10"), None, "per_second must be an int or float, not Decimal"),
    (None, None, "per_second must be an int or float, not NoneType"),
]


def fields(raw: "redis.Redis", layout: str, topic: str = "t") -> Dict[bytes, bytes]:
    return raw.hgetall(names(layout, topic)["flow"])


def test_set_read_and_clear_a_limit(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    assert d.flow("t").rate_limit is None
    state = d.set_rate_limit("t", 50)
    assert isinstance(state, FlowState) and state.changed is True
    assert state.rate_limit == RateLimit(50.0, 50)  # the script's default burst: one second's worth
    assert (state.paused, state.held) == (False, 0)
    f = fields(raw, layout)
    # As sent (repr of the float), the burst the script chose, and a full bucket for a topic not limited before.
    assert (f[b"per_second"], f[b"burst"], float(f[b"tokens"])) == (b"50", b"50", 50.0)
    assert int(f[b"tokens_at"]) == pytest.approx(state.at * 1000, abs=2)
    assert d.flow("t").rate_limit == RateLimit(50.0, 50) and d.flow("t").changed is False
    assert d.set_rate_limit("t", 50).changed is False  # the same limit again
    assert d.set_rate_limit("t", 50, 50).changed is False  # the default burst, said
    again = d.set_rate_limit("t", 0.5, 3)  # fractions: one job every two seconds
    assert (again.changed, again.rate_limit) == (True, RateLimit(0.5, 3))
    assert (fields(raw, layout)[b"per_second"], fields(raw, layout)[b"burst"]) == (b"0.5", b"3")
    assert d.set_rate_limit("t", 0.5).rate_limit == RateLimit(0.5, 1)  # at least one whole job
    assert d.is_paused("t") is False  # a limit is no pause
    assert d.flow("other").rate_limit is None  # another topic is not touched
    assert d.clear_rate_limit("t") is True
    assert d.flow("t").rate_limit is None
    assert not {b"per_second", b"burst", b"tokens", b"tokens_at"} & set(fields(raw, layout))
    before = snapshot(raw)
    assert d.clear_rate_limit("t") is False  # none left: nothing written
    assert snapshot(raw) == before


def test_shortest_text_is_sent_and_read_back(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    # The script stores the shortest text of the number, whatever was sent.
    for rate, text in ((0.1, "0.1"), (1 / 3, "0.3333333333333333"), (1 / 86400, "1.1574074074074073e-05"),
                       (1_000_000, "1000000"), (12.5, "12.5")):
        state = d.set_rate_limit("t", rate)
        assert fields(raw, layout)[b"per_second"] == text.encode()
        assert state.rate_limit is not None and state.rate_limit.per_second == float(rate)  # exactly


def test_a_limit_and_a_pause_combine(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    d.set_rate_limit("t", 20, 10)
    assert d.pause("t") is True
    state = d.flow("t")
    assert state.paused and state.rate_limit == RateLimit(20.0, 10)
    assert d.resume("t") is True
    assert d.flow("t").rate_limit == RateLimit(20.0, 10)  # the backlog drains at the limit
    assert d.clear_rate_limit("t") is True and d.is_paused("t") is False


def test_a_classic_limit_lists_the_topic_for_the_server(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    d.set_rate_limit("t", 5)
    if layout == "classic":
        # Like a pause: the server puts the topic's due ids through its flow pool, in due order.
        assert raw.smembers(f"{P}flow_topics") == {b"t"}
    else:
        assert not raw.exists(f"{P}flow_topics")


def test_a_limit_change_is_announced(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    listener = WakeListener(raw, P)
    try:
        state = d.set_rate_limit("mail box", 5)
        first = listener.next()
        d.clear_rate_limit("mail box")
        second = listener.next()
    finally:
        listener.close()
    # "<now> <topic>": every server looks at the topic at once.
    assert first == f"{state.at:.3f} mail box".encode()
    assert second is not None and re.fullmatch(rb"\d+\.\d{3} mail box", second)


@pytest.mark.parametrize("per_second,burst,message", REFUSED, ids=lambda v: repr(v)[:20])
def test_the_script_refuses_a_bad_limit_in_its_words(
    d: Delayer, raw: "redis.Redis", layout: str, per_second: Any, burst: Any, message: str
) -> None:
    raw.config_resetstat()
    with pytest.raises(InvalidArgument) as e:
        d.set_rate_limit("t", per_second, burst)
    assert str(e.value) == message
    assert isinstance(e.value, ValueError)  # as every InvalidArgument
    assert raw.info("commandstats")["cmdstat_evalsha"]["calls"] >= 1  # the script judged it, not the SDK
    assert raw.dbsize() == 0  # checked before any write


def test_a_refusal_keeps_the_limit_in_place(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    d.set_rate_limit("t", 5, 2)
    before = snapshot(raw)
    with pytest.raises(InvalidArgument, match="pause it instead"):
        d.set_rate_limit("t", 0)
    assert snapshot(raw) == before and d.flow("t").rate_limit == RateLimit(5.0, 2)


@pytest.mark.parametrize("per_second,burst,message", MISTYPED, ids=lambda v: repr(v)[:20])
def test_values_of_the_wrong_type_are_refused_before_sending(
    d: Delayer, raw: "redis.Redis", layout: str, per_second: Any, burst: Any, message: str
) -> None:
    raw.config_resetstat()
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        d.set_rate_limit("t", per_second, burst)
    assert "cmdstat_evalsha" not in raw.info("commandstats") and raw.dbsize() == 0


def test_the_topic_is_checked_as_pause_checks_it(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    for topic in ("", 5, None):
        for call in (lambda: d.pause(topic), lambda: d.set_rate_limit(topic, 5), lambda: d.clear_rate_limit(topic)):
            with pytest.raises(InvalidArgument) as e:
                call()
            assert str(e.value)
    with pytest.raises(InvalidArgument) as paused:
        d.pause("")
    with pytest.raises(InvalidArgument) as limited:
        d.set_rate_limit("", 0)  # the topic first: the same words as pause's
    assert str(paused.value) == str(limited.value)
    assert raw.dbsize() == 0


def test_held_counts_due_jobs_a_per_topic_limit_holds(url: str, raw: "redis.Redis") -> None:
    with Delayer(url, P, layout="topic") as d:
        for i in range(3):
            d.push("t", f"due-{i}", 0)
        d.push("t", "later", 3600)
        raw.sadd(P + "topics", "t")  # listed, as the server lists the topics it moves
        assert d.flow("t").held == 0 and d.stats().topics[0].held == 0  # unlimited: nothing held
        # No server runs: the due jobs wait in the pool, as those over the limit would.
        assert d.set_rate_limit("t", 2, 1).held == 3
        t = d.stats().topics[0]
        assert (t.held, t.rate_limit, t.paused, t.scheduled) == (3, RateLimit(2.0, 1), False, 4)
        d.clear_rate_limit("t")
        assert d.flow("t").held == 0 and d.stats().topics[0].held == 0


def test_held_counts_the_classic_flow_pool_of_a_limited_topic(url: str, raw: "redis.Redis") -> None:
    with Delayer(url, P) as d:
        d.set_rate_limit("t", 2, 1)
        # What the server's move.lua sets aside for a listed topic (no server runs here).
        raw.zadd(f"{P}flow_pool:t", {"a": 1.0, "b": 2.0})
        assert d.flow("t").held == 2
        t = d.stats().topics[0]
        assert (t.topic, t.held, t.rate_limit, t.paused) == ("t", 2, RateLimit(2.0, 1), False)
        assert d.clear_rate_limit("t") is True
        t = d.stats().topics[0]
        assert (t.held, t.rate_limit) == (2, None)  # until the server drains it, at full speed


def test_stats_give_each_topics_limit(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    for topic in ("a", "b", "c"):
        d.push(topic, f"{topic}-later", 3600)
    raw.sadd(P + "topics", "a", "b", "c")
    d.set_rate_limit("a", 0.5)
    d.set_rate_limit("b", 100, 20)
    d.pause("b")
    got = {t.topic: (t.rate_limit, t.paused) for t in d.stats().topics}
    assert got == {"a": (RateLimit(0.5, 1), False), "b": (RateLimit(100.0, 20), True), "c": (None, False)}


def test_lookup_says_the_jobs_topic_is_limited(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    d.push("t", "s", 3600)
    d.push("t", "r", 0)
    make_ready(raw, layout, 1)
    d.push("u", "other", 3600)
    d.set_rate_limit("t", 5)
    assert [(d.job("t", i).state, d.job("t", i).flow) for i in ("s", "r")] == [
        ("scheduled", "limited"), ("ready", "limited")]
    assert d.job("u", "other").flow == ""
    d.pause("t")
    assert d.job("t", "s").flow == "paused"  # paused wins
    d.resume("t")
    d.clear_rate_limit("t")
    assert d.job("t", "s").flow == ""


def test_a_limit_written_by_hand_is_read_never_a_crash(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    flow = names(layout)["flow"]
    d.push("t", "due", 0)
    raw.sadd(P + "topics", "t")
    raw.hset(flow, mapping={"per_second": "7", "burst": "4"})
    assert d.flow("t").rate_limit == RateLimit(7.0, 4)
    raw.hset(flow, mapping={"per_second": "fast", "burst": "many"})
    assert d.flow("t").rate_limit is None
    t = d.stats().topics[0]
    assert t.rate_limit is None and t.held == (0 if layout == "classic" else 1)  # limited all the same
    assert d.job("t", "due").flow == "limited"  # lookup.lua: the field is there
    raw.hset(flow, mapping={"per_second": "5", "burst": "2.5"})
    assert d.flow("t").rate_limit is None
    assert d.clear_rate_limit("t") is True  # unlimit drops whatever is there
    assert d.flow("t").rate_limit is None


# -- the builder, decoders and the error mapping, without Redis -------------------------------------


def test_the_builder_sends_the_limit_as_text_and_judges_nothing_else() -> None:
    from delayer import _calls

    for k, script in ((Keys(P), "flow"), (Keys(P, "topic"), "flow_topic")):
        call = _calls.flow_call(k, "t", "limit", 0.5, 3)
        assert call.script == script and call.args == ["t", "limit", P + "wake", "0.5", "3"]
        assert _calls.flow_call(k, "t", "limit", 50).args[3:] == ["50.0", ""]  # "": the script's default burst
        for action in ("get", "pause", "resume", "unlimit"):
            assert _calls.flow_call(k, "t", action).args[3:] == ["", ""]
        # Out of range, but of the right type: passed on for flow.lua to refuse (its rules are written once).
        for rate, burst in ((0, None), (-1, 0), (math.nan, None), (math.inf, None), (2e6, 10**9)):
            assert _calls.flow_call(k, "t", "limit", rate, burst).args[3] == repr(float(rate))
        assert _calls.flow_call(k, "t", "limit", 10**400).args[3] == str(10**400)  # past any float: its digits
    with pytest.raises(ValueError):
        _calls.flow_call(Keys(P), "t", "stop")


def test_the_limit_is_decoded_in_one_place() -> None:
    from delayer import _replies

    assert _replies.rate_limit(b"0.5", b"3") == RateLimit(0.5, 3)
    assert _replies.rate_limit("100", "100") == RateLimit(100.0, 100)
    for per_second, burst in ((b"", b""), (b"", b"3"), (b"fast", b"3"), (b"5", b""), (b"5", b"2.5"), (b"nan", b"1"),
                              (b"inf", b"1"), (b"5", b"inf"), (b"\xff", b"1")):
        assert _replies.rate_limit(per_second, burst) is None, (per_second, burst)
    for bad in ((5, b"1"), (b"5", None), (None, None)):
        with pytest.raises(ProtocolError):
            _replies.rate_limit(*bad)


def test_a_scripts_invalid_argument_is_the_sdks() -> None:
    from redis.exceptions import ResponseError

    from delayer._translate import translate

    why = 'the rate must be more than 0 jobs per second, got -1'
    for text in (f"invalid argument: {why}", f"ERR invalid argument: {why}"):
        e = translate(ResponseError(text), "127.0.0.1:1", [])
        assert isinstance(e, InvalidArgument) and str(e) == why
    # Any other error of a script is still Redis's.
    for text in ("WRONGTYPE delayer:flow:t is a string, not a hash", "flow: unknown action x", "invalid argument"):
        assert type(translate(ResponseError(text), "127.0.0.1:1", [])) is ProtocolError


def test_stats_decode_each_topics_limit() -> None:
    from delayer.inspect import stats_op

    op = stats_op(Keys(P))  # classic: stats.lua's rows end with per_second and burst
    next(op)
    with pytest.raises(StopIteration) as done:
        op.send([2, 0, 1, [b"a", 1, 0, 0, 0, b"", 1, b"0.5", b"1"], [b"b", 1, 0, 0, 0, b"", 0, b"", b""]])
    assert [(t.topic, t.rate_limit, t.held) for t in done.value.value.topics] == [
        ("a", RateLimit(0.5, 1), 1), ("b", None, 0)]
    op = stats_op(Keys(P, "topic"))  # per topic: HMGET of the flow hash; held counted while limited
    next(op)
    op.send([[b"0", [b"a", b"b"]]])
    with pytest.raises(StopIteration) as done:
        op.send([3, 0, 0, 0, [None, b"20.0", b"10"], 2, 3, 0, 0, 0, [None, b"junk", None], 2])
    assert [(t.topic, t.rate_limit, t.held, t.paused) for t in done.value.value.topics] == [
        ("a", RateLimit(20.0, 10), 2, False), ("b", None, 2, False)]
