"""Seeing every job: where one job is (:meth:`job`), pages of a topic's
scheduled, ready and reserved jobs, and per-topic numbers (:meth:`stats`),
so that "when does order 42's auto-close fire?" needs no redis-cli.

Everything here only reads, with lookup.lua, list.lua and stats.lua (the
per-topic layout's stats: SSCAN of the topics, then ZCARD / LLEN per topic,
and each topic's flow control: HMGET of its flow hash's pause and rate limit,
ZCOUNT of its due jobs).
Each operation is a generator (as in :mod:`delayer._ops`), which the mixins'
methods of the sync and asyncio clients only drive.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Generic, List, Optional, Tuple, TypeVar

from . import _trace, scripts
from ._calls import Arg, ScriptCall
from ._names import name, name_bytes
from ._replies import _int, rate_limit
from ._send import Commands
from ._rules import MAX_POSITION, check_name, count
from .errors import ProtocolError
from .keys import Keys
from .models import RateLimit

if TYPE_CHECKING:
    from ._send import Op

__all__ = ["JobInfo", "Listed", "Page", "TopicStats", "Stats", "STATES", "InspectMixin", "AsyncInspectMixin"]

T = TypeVar("T")

#: The states :meth:`job` reports.
STATES = ("scheduled", "ready", "reserved", "dead", "malformed", "unknown")
#: The most entries one page holds.
MAX_PAGE = 1000
#: Entries list.lua examines per call (bounds each call's time in Redis).
EXAMINE_PER_CALL = 1000
#: Calls one page may take before it is handed back short, with a cursor.
CALLS_PER_PAGE = 10
#: Per-topic reserved counts are read while the reserved set is no larger.
RESERVED_CAP = 1000
#: Per-topic layout stats: topics asked of SSCAN per call, and read per round trip.
TOPICS_PER_SCAN = 1000
TOPICS_PER_ROUND = 250
#: Per-topic layout stats: commands per topic (ZCARD, LLEN, ZCARD, LLEN, HMGET, ZCOUNT).
PER_TOPIC = 6


@dataclass(frozen=True)
class JobInfo:
    """What :meth:`job` found; what does not apply to the state is None."""

    id: str
    #: One of :data:`STATES`.
    state: str
    topic: Optional[str]
    #: The body's length in bytes.
    body_size: Optional[int]
    #: Reservations so far.
    attempts: Optional[int]
    #: Reservations allowed (0: no limit), when set.
    max_attempts: Optional[int]
    #: Scheduled: the due time (Unix seconds).
    due: Optional[float]
    #: Reserved: the reservation's deadline.
    deadline: Optional[float]
    #: Dead: when it died.
    dead_at: Optional[float]
    #: Dead: ``"buried"`` or ``"max_attempts"``.
    dead_reason: Optional[str]
    #: The last failed attempt's error, when a worker gave one (or ``"ttr expired"``).
    last_error: Optional[str]
    #: The W3C trace context it was pushed with, if any.
    traceparent: Optional[str] = None
    #: One of :data:`FLOWS`: ``"paused"`` while the job's topic is paused
    #: (nothing of it is handed out: a scheduled job is not made ready when
    #: due, a ready one not handed out); ``"limited"`` while it runs with a
    #: rate limit (a due job waits for its turn before it becomes ready);
    #: else ``""``.
    flow: str = ""


@dataclass(frozen=True)
class Listed:
    """A scheduled job (``time`` = due time) or a reserved one (``time`` = deadline)."""

    id: str
    time: float

    @property
    def id_bytes(self) -> bytes:
        """The id as Redis holds it (:attr:`delayer.Message.id_bytes`)."""
        return name_bytes(self.id)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing. ``next`` is the cursor of the next page, None at
    the end; a page may be short (even empty) while ``next`` is not None."""

    items: List[T]
    next: Optional[int]


@dataclass(frozen=True)
class TopicStats:
    """One topic's numbers; ``reserved`` is None when too many jobs are
    reserved to count per topic (:data:`RESERVED_CAP`)."""

    topic: str
    scheduled: int
    ready: int
    reserved: Optional[int]
    dead: int
    #: Whether the topic is paused (nothing of it is handed out), as
    #: :meth:`delayer.Delayer.pause` left it; also for a flow hash of the
    #: wrong type, which pauses the topic too.
    paused: bool = False
    #: When the pause began (Unix seconds); None while the topic runs, and
    #: while it is paused by a flow hash whose ``paused`` is no time (or of the
    #: wrong type).
    paused_since: Optional[float] = None
    #: Due jobs held back by the pause or the rate limit (as
    #: :attr:`delayer.FlowState.held`): in the classic layout those the server
    #: set aside in the topic's flow pool, until it drains them (also counted
    #: in ``scheduled``); in the per-topic layout those of its pool due by now
    #: (the client's clock) while the topic is paused or limited, 0 while it
    #: runs unlimited.
    held: int = 0
    #: The topic's rate limit (:meth:`delayer.Delayer.set_rate_limit`); None
    #: when it has none (or one that is no number, written by hand).
    rate_limit: Optional[RateLimit] = None

    @property
    def topic_bytes(self) -> bytes:
        """The topic as Redis holds it (:attr:`delayer.Message.topic_bytes`)."""
        return name_bytes(self.topic)


@dataclass(frozen=True)
class Stats:
    """Per-topic numbers (sorted by topic) and totals that count every job."""

    scheduled_total: int
    reserved_total: int
    topics: List[TopicStats]


def _text(value: object) -> Optional[str]:
    """A script's string, None when empty ("not known"); bytes that are not
    UTF-8 as surrogate escapes, so an id read here names its job."""
    if isinstance(value, bytes):
        value = name(value)
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise ProtocolError(f"expected a string in Redis's reply, got {value!r:.200}")
    return value


def _number(value: object) -> Optional[int]:
    text = _text(value)
    if text is None:
        return None
    if not text.isdigit():
        raise ProtocolError(f"expected a count in Redis's reply, got {text!r:.200}")
    return int(text)


def _time(value: object) -> Optional[float]:
    text = _text(value)
    try:
        return None if text is None else round(float(text), 3)
    except ValueError:
        raise ProtocolError(f"expected a time in Unix seconds, got {text!r:.200}") from None


#: lookup.lua's ``flow``: the job's topic paused, rate limited, or neither.
FLOWS = ("paused", "limited", "")


def _pause(script: str, value: object) -> Tuple[bool, Optional[float]]:
    """A flow hash's ``paused`` as stats.lua hands it on: ``""`` running;
    anything else paused, since that time ("s.mmm"), or since None when it is
    no time ("?": a flow hash of the wrong type; a pause written by hand may
    hold anything, and every value pauses the topic: the hand-out scripts
    test the field, not its value)."""
    if value in (b"", ""):
        return False, None
    if not isinstance(value, (bytes, str)):
        raise ProtocolError(f"{script}: expected the pause time as a string, got {value!r:.200}")
    try:
        since = float(value)
    except ValueError:
        return True, None
    return True, (round(since, 3) if math.isfinite(since) else None)


def _page_args(keys: Keys, topic: object, cursor: object, how_many: object) -> Tuple[str, int, int]:
    t = keys.topic(topic)
    return t, count("cursor", cursor, 0, MAX_POSITION), count("count", how_many, 1, MAX_PAGE)


def job_op(keys: Keys, topic: object, job_id: object) -> Op[JobInfo]:
    t, i = keys.topic(topic), check_name("id", job_id)
    n = keys.names(t)
    reply = yield ScriptCall(scripts.LOOKUP, [n.bucket(i), n.pool, n.reserved, n.flow], [i, t, n.flow_pool_prefix])
    if not isinstance(reply, list) or len(reply) != 10:
        raise ProtocolError(f"lookup.lua: expected 10 fields, got {reply!r:.200}")
    state = _text(reply[0]) or ""
    if state not in STATES:
        raise ProtocolError(f"lookup.lua: unknown state {state!r}")
    flow = _text(reply[9]) or ""
    if flow not in FLOWS:
        raise ProtocolError(f"lookup.lua: unknown flow {flow!r:.200}")
    when = _time(reply[5])
    return JobInfo(id=i, state=state, topic=_text(reply[1]), body_size=_number(reply[2]), attempts=_number(reply[3]),
                   max_attempts=_number(reply[4]), due=when if state == "scheduled" else None,
                   deadline=when if state == "reserved" else None, dead_at=when if state == "dead" else None,
                   dead_reason=_text(reply[6]), last_error=_text(reply[7]), traceparent=_trace.from_redis(i, reply[8]),
                   flow=flow)


def _list_reply(reply: object) -> Tuple[Optional[int], List[Tuple[str, Optional[float]]]]:
    if not isinstance(reply, list) or len(reply) % 2 != 1:
        raise ProtocolError(f"list.lua: expected the next rank then pairs, got {reply!r:.200}")
    pairs = [(_text(reply[k]) or "", _time(reply[k + 1])) for k in range(1, len(reply), 2)]
    return _number(reply[0]), pairs


def scan_op(keys: Keys, reserved: bool, topic: object, cursor: object, how_many: object) -> Op[Page[Listed]]:
    """A page of the topic's pool, or with ``reserved`` of its reservations."""
    t, rank, n = _page_args(keys, topic, cursor, how_many)
    names = keys.names(t)
    zset = names.reserved if reserved else names.pool
    # The reserved set's scores are ms; list.lua turns them into seconds.
    mode = ["reserved"] if reserved else []
    items: List[Listed] = []
    for _ in range(CALLS_PER_PAGE):
        call = ScriptCall(scripts.LIST, [zset], [names.bucket_prefix, t, rank, n - len(items), EXAMINE_PER_CALL, *mode])
        nxt, pairs = _list_reply((yield call))
        items.extend(Listed(i, time if time is not None else 0.0) for i, time in pairs)
        if nxt is None or len(items) >= n:
            return Page(items, nxt)
        rank = nxt
    return Page(items, rank)


def ready_op(keys: Keys, topic: object, cursor: object, how_many: object) -> Op[Page[str]]:
    t, start, n = _page_args(keys, topic, cursor, how_many)
    call = ScriptCall(scripts.LIST, [keys.names(t).ready], ["", t, start, n, 1, "ready"])
    nxt, pairs = _list_reply((yield call))
    return Page([i for i, _ in pairs], nxt)


def _scan_reply(reply: object) -> Tuple[int, List[str]]:
    """SSCAN's ``[cursor, members]`` (as redis-py parses it, or raw)."""
    if isinstance(reply, (list, tuple)) and len(reply) == 1:
        reply = reply[0]  # one command's reply in a pipeline's list
    if not isinstance(reply, (list, tuple)) or len(reply) != 2 or not isinstance(reply[1], (list, tuple)):
        raise ProtocolError(f"SSCAN: expected [cursor, members], got {reply!r:.200}")
    cursor = _text(reply[0]) or "0"
    if not cursor.isdigit():
        raise ProtocolError(f"SSCAN: expected a cursor, got {cursor!r:.200}")
    return int(cursor), [_text(m) or "" for m in reply[1]]


def _clock() -> str:
    """The client's clock in Unix seconds, 3 decimals: the per-topic layout's
    held jobs are those of a paused topic's pool due by then."""
    return f"{time.time():.3f}"


def topic_stats_op(keys: Keys) -> Op[Stats]:
    """The per-topic layout's stats: ZCARD / LLEN of each topic's keys, HMGET
    of its flow hash's ``paused``, ``per_second`` and ``burst``, and ZCOUNT of
    its pool's due jobs (held while paused or limited: the server leaves them
    there), a round trip per :data:`TOPICS_PER_ROUND`."""
    names: List[str] = []
    cursor = 0
    while True:
        cursor, found = _scan_reply((yield Commands([("SSCAN", keys.topics, cursor, "COUNT", TOPICS_PER_SCAN)])))
        names.extend(found)
        if cursor == 0:
            break
    # SSCAN may return a member twice; empty or braced members are no topic of this layout.
    topics = sorted({t for t in names if t and "{" not in t and "}" not in t})
    out: List[TopicStats] = []
    for start in range(0, len(topics), TOPICS_PER_ROUND):
        part = topics[start : start + TOPICS_PER_ROUND]
        commands: List[Tuple[Arg, ...]] = []
        now = _clock()
        for t in part:
            n = keys.names(t)
            commands += [("ZCARD", n.pool), ("LLEN", n.ready), ("ZCARD", n.reserved), ("LLEN", n.dead),
                         ("HMGET", n.flow, "paused", "per_second", "burst"), ("ZCOUNT", n.pool, "-inf", now)]
        # A flow hash of the wrong type pauses its topic (as stats.lua's "?"): its error is read, not raised.
        replies = yield Commands(commands, tolerate=True)
        if not isinstance(replies, (list, tuple)) or len(replies) != len(commands):
            raise ProtocolError(f"expected {len(commands)} replies, got {replies!r:.200}")
        for k, t in enumerate(part):
            pool, ready, reserved, dead, flow, due = replies[PER_TOPIC * k : PER_TOPIC * k + PER_TOPIC]
            for r in (pool, ready, reserved, dead, due):
                if isinstance(r, BaseException):
                    raise r
            scheduled, queued, taken, buried = (_int("ZCARD / LLEN", r) for r in (pool, ready, reserved, dead))
            stopped, since, limited, limit = _flow_fields(flow)
            out.append(TopicStats(t, scheduled, queued, taken, buried, paused=stopped, paused_since=since,
                                  held=_int("ZCOUNT", due) if stopped or limited else 0, rate_limit=limit))
    return Stats(sum(t.scheduled for t in out), sum(t.reserved or 0 for t in out), out)


def _flow_fields(reply: object) -> Tuple[bool, Optional[float], bool, Optional[RateLimit]]:
    """A per-topic flow hash's HMGET ``paused``, ``per_second``, ``burst``, as
    stats.lua reads the classic one: (paused, since, limited, the limit).
    Limited while ``per_second`` is there (as lookup.lua says "limited"),
    whatever it holds; the limit is None when it is no number."""
    if isinstance(reply, BaseException):  # a flow hash of the wrong type pauses its topic (stats.lua's "?")
        return True, None, False, None
    if not isinstance(reply, (list, tuple)) or len(reply) != 3:
        raise ProtocolError(f"HMGET: expected 3 fields, got {reply!r:.200}")
    paused, per_second, burst = reply
    if paused in (b"", ""):  # no time, but paused all the same
        stopped, since = True, None
    else:
        stopped, since = (False, None) if paused is None else _pause("HMGET", paused)
    limit = None if per_second is None else rate_limit(per_second, b"" if burst is None else burst)
    return stopped, since, per_second is not None, limit


def stats_op(keys: Keys) -> Op[Stats]:
    if keys.per_topic:
        return (yield from topic_stats_op(keys))
    call = ScriptCall(scripts.STATS,
                      [keys.topics, keys.scheduled_count, keys.job_pool, keys.reserved, keys.flow_topics],
                      [keys.ready_queue_prefix, keys.dead_prefix, keys.bucket_prefix, RESERVED_CAP,
                       keys.flow_prefix, keys.flow_pool_prefix])
    reply = yield call
    if not isinstance(reply, list) or len(reply) < 3:
        raise ProtocolError(f"stats.lua: unexpected reply {reply!r:.200}")
    known = _int("stats.lua", reply[2]) == 1
    topics = []
    for entry in reply[3:]:
        if not isinstance(entry, list) or len(entry) != 9:
            raise ProtocolError(f"stats.lua: unexpected topic entry {entry!r:.200}")
        reserved = _int("stats.lua", entry[3])
        paused, since = _pause("stats.lua", entry[5])
        topics.append(TopicStats(_text(entry[0]) or "", _int("stats.lua", entry[1]), _int("stats.lua", entry[2]),
                                 reserved if known else None, _int("stats.lua", entry[4]), paused=paused,
                                 paused_since=since, held=_int("stats.lua", entry[6]),
                                 rate_limit=rate_limit(entry[7], entry[8])))
    return Stats(_int("stats.lua", reply[0]), _int("stats.lua", reply[1]), topics)


class InspectMixin:
    """Inspection methods of the sync :class:`delayer.Delayer`."""

    _keys: Keys

    if TYPE_CHECKING:

        def _drive(self, op: Op[T]) -> T: ...

    def job(self, topic: str, id: str) -> JobInfo:
        """Where job ``id`` of ``topic`` is, and what it carries (a job of another topic is ``unknown``)."""
        return self._drive(job_op(self._keys, topic, id))

    def list_scheduled(self, topic: str, cursor: int = 0, count: int = 100) -> Page[Listed]:
        """A page of ``topic``'s scheduled jobs, earliest due first, from ``cursor`` (0, then ``page.next``)."""
        return self._drive(scan_op(self._keys, False, topic, cursor, count))

    def list_reserved(self, topic: str, cursor: int = 0, count: int = 100) -> Page[Listed]:
        """A page of ``topic``'s reserved jobs, earliest deadline first (``time`` = deadline)."""
        return self._drive(scan_op(self._keys, True, topic, cursor, count))

    def list_ready(self, topic: str, cursor: int = 0, count: int = 100) -> Page[str]:
        """A page of the ids in ``topic``'s ready queue, next out first."""
        return self._drive(ready_op(self._keys, topic, cursor, count))

    def stats(self) -> Stats:
        """Scheduled, ready, reserved and dead jobs per topic; no scan of the pool."""
        return self._drive(stats_op(self._keys))


class AsyncInspectMixin:
    """The same for :class:`delayer.aio.Delayer` (each method is a coroutine; :mod:`delayer.aio` copies the docs)."""

    _keys: Keys

    if TYPE_CHECKING:

        def _drive(self, op: Op[T]) -> Awaitable[T]: ...

    async def job(self, topic: str, id: str) -> JobInfo:
        return await self._drive(job_op(self._keys, topic, id))

    async def list_scheduled(self, topic: str, cursor: int = 0, count: int = 100) -> Page[Listed]:
        return await self._drive(scan_op(self._keys, False, topic, cursor, count))

    async def list_reserved(self, topic: str, cursor: int = 0, count: int = 100) -> Page[Listed]:
        return await self._drive(scan_op(self._keys, True, topic, cursor, count))

    async def list_ready(self, topic: str, cursor: int = 0, count: int = 100) -> Page[str]:
        return await self._drive(ready_op(self._keys, topic, cursor, count))

    async def stats(self) -> Stats:
        return await self._drive(stats_op(self._keys))


