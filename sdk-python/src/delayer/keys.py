"""Redis key names of the Delayer protocol (docs/PROTOCOL.md, "Keys" and
"The per-topic layout").

This is the only module that knows the layouts: it builds key names (and
the name of the one pub/sub channel) and says what a topic must be, for
both. Scripts get each name they touch as a key, or as a per-kind prefix
(``*_prefix``) for names that depend on data they read; they never build one
themselves. A call builder asks :meth:`Keys.names` (or :meth:`Keys.scope`,
:meth:`Keys.id_names`) for the names of one topic and passes them on, so it
never asks which layout it runs on.
"""

from __future__ import annotations

import json

from typing import NamedTuple, Optional, Tuple

from ._rules import check_name
from .errors import InvalidArgument

__all__ = ["Keys", "TopicNames", "DEFAULT_PREFIX", "CLASSIC", "TOPIC", "LAYOUTS"]

#: The key prefix used when none is configured.
DEFAULT_PREFIX = "delayer:"
#: Delayer 1.x's layout: one pool, global ids (the default).
CLASSIC = "classic"
#: Everything of one topic in one hash slot, ids per topic (``layout = topic``).
TOPIC = "topic"
#: Every layout, as ``[delayer] layout`` and ``layout=`` name them.
LAYOUTS = (CLASSIC, TOPIC)


class TopicNames(NamedTuple):
    """The names every call on one topic needs, in the client's layout.

    In the classic layout most are shared by every topic (one pool, one
    reserved set); in the per-topic layout each is the topic's own
    (``<prefix>{<topic>}:<kind>``). Id-only calls of the classic layout know no
    topic: :attr:`ready` and :attr:`dead` are then ``""`` (they use neither).
    """

    #: The ZSET of waiting ids, scored by due time.
    pool: str
    #: What a job's HASH name puts before its id.
    bucket_prefix: str
    #: The LIST of due ids of the topic.
    ready: str
    #: The ZSET of reserved ids, scored by deadline (Unix ms).
    reserved: str
    #: The LIST of ids whose bucket could not be routed.
    malformed: str
    #: The counter reserve takes receipts from.
    receipt_seq: str
    #: The LIST of the topic's dead letters.
    dead: str
    #: What a dead-letter list's name puts before its topic (release.lua's
    #: ARGV[2]); ``""`` in the per-topic layout, whose lists are not prefix + topic.
    dead_prefix: str
    #: The HASH of waiting jobs per topic as the scripts' optional last key;
    #: none in the per-topic layout, where a topic's pool is its count.
    counts: Tuple[str, ...]
    #: release.lua's KEYS[4]: the scheduled counts, or in the per-topic
    #: layout (where :attr:`dead_prefix` is ``""``) the topic's dead list.
    release4: str
    #: The HASH ended reservations are counted in (``acked:<topic>`` -> count;
    #: ack, release and reserve's acks write it, the server exports it).
    outcomes: str

    def bucket(self, job_id: str) -> str:
        """The HASH holding one job."""
        return self.bucket_prefix + job_id


class Keys:
    """Key names under one prefix, which is prepended as is, in one layout.

    >>> Keys("shop:delayer:").job_pool
    'shop:delayer:job_pool'
    >>> Keys("shop:", "topic").names("mail").pool
    'shop:{mail}:pool'

    The properties below are the classic layout's names (and the index names
    both layouts share); :meth:`names` gives a topic's names in either layout.
    """

    __slots__ = ("prefix", "layout")

    def __init__(self, prefix: str = DEFAULT_PREFIX, layout: str = CLASSIC) -> None:
        """Build key names under ``prefix`` (e.g. ``"delayer:"``) in ``layout``
        (``"classic"`` or ``"topic"``; the clients check both first)."""
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
        self.prefix: str = prefix
        self.layout: str = layout

    @property
    def per_topic(self) -> bool:
        """True in the per-topic layout."""
        return self.layout == TOPIC

    def names(self, topic: Optional[str]) -> TopicNames:
        """The names of ``topic``'s calls in this layout (``topic`` checked by
        the caller; None only for the classic layout's id-only calls)."""
        if self.layout == TOPIC:
            if topic is None:
                raise ValueError("the per-topic layout's names need a topic")
            tag = f"{self.prefix}{{{topic}}}:"
            return TopicNames(pool=tag + "pool", bucket_prefix=tag + "job:", ready=tag + "ready",
                              reserved=tag + "reserved", malformed=tag + "malformed", receipt_seq=tag + "receipt_seq",
                              dead=tag + "dead", dead_prefix="", counts=(), release4=tag + "dead",
                              outcomes=tag + "outcomes")
        return TopicNames(pool=self.job_pool, bucket_prefix=self.bucket_prefix,
                          ready="" if topic is None else self.ready_queue(topic), reserved=self.reserved,
                          malformed=self.malformed, receipt_seq=self.receipt_seq,
                          dead="" if topic is None else self.dead(topic), dead_prefix=self.dead_prefix,
                          counts=(self.scheduled_count,), release4=self.scheduled_count, outcomes=self.outcomes)

    def topic(self, value: object) -> str:
        """Check a topic (:func:`~delayer._rules.check_name`); in the per-topic
        layout it is a hash tag, so ``{`` and ``}`` are refused too."""
        return check_topic(value, self.layout)

    def scope(self, topic: object) -> Optional[str]:
        """The topic whose names a call about a job of ``topic`` uses: the
        topic (checked) in the per-topic layout; None in the classic layout,
        whose names every topic shares and whose ids are global (the topic is
        then not needed, nor checked)."""
        return self.topic(topic) if self.layout == TOPIC else None

    def id_names(self, topic: object, usage: str) -> TopicNames:
        """The names of a call that names a job by id, given ``topic=`` (None:
        not given): the per-topic layout's ids are per topic, so it needs one
        (``usage`` says how to give it); a topic given is checked."""
        if topic is None and self.layout == TOPIC:
            raise InvalidArgument(usage)
        return self.names(None if topic is None else self.topic(topic))

    @property
    def job_pool(self) -> str:
        """The ZSET of waiting job ids, scored by due time: ``<prefix>job_pool``."""
        return self.prefix + "job_pool"

    @property
    def malformed(self) -> str:
        """The LIST of ids whose bucket could not be routed: ``<prefix>malformed``."""
        return self.prefix + "malformed"

    @property
    def bucket_prefix(self) -> str:
        """The prefix of every job bucket key: ``<prefix>job_bucket:``."""
        return self.prefix + "job_bucket:"

    def job_bucket(self, job_id: str) -> str:
        """The HASH holding one job (``topic``, ``body``): ``<prefix>job_bucket:<id>``."""
        return self.bucket_prefix + job_id

    @property
    def ready_queue_prefix(self) -> str:
        """What every ready queue's name starts with: ``<prefix>ready_queue:``."""
        return self.prefix + "ready_queue:"

    def ready_queue(self, topic: str) -> str:
        """The LIST of due ids of one topic: ``<prefix>ready_queue:<topic>``."""
        return self.ready_queue_prefix + topic

    @property
    def reserved(self) -> str:
        """The ZSET of reserved ids, scored by their deadline: ``<prefix>reserved``."""
        return self.prefix + "reserved"

    @property
    def receipt_seq(self) -> str:
        """The counter reserve takes receipts from: ``<prefix>receipt_seq``."""
        return self.prefix + "receipt_seq"

    @property
    def wake(self) -> str:
        """The pub/sub channel that announces an earlier due time: ``<prefix>wake``.

        A channel, not a key: the scripts announce ``"<time> <topic>"`` there
        when they write a time before a pool's or reserved set's earliest, in
        both layouts; the server wakes for it and, in the per-topic layout,
        keeps its index (:attr:`due`) from it.
        """
        return self.prefix + "wake"

    @property
    def dead_prefix(self) -> str:
        """What every dead-letter list's name starts with: ``<prefix>dead:``."""
        return self.prefix + "dead:"

    def dead(self, topic: str) -> str:
        """The LIST of one topic's dead letters, newest at the left: ``<prefix>dead:<topic>``."""
        return self.dead_prefix + topic

    @property
    def scheduled_count(self) -> str:
        """The HASH of jobs waiting in the pool per topic: ``<prefix>scheduled_count``."""
        return self.prefix + "scheduled_count"

    @property
    def outcomes(self) -> str:
        """The HASH of ended reservations per outcome and topic
        (``acked:<topic>`` -> count): ``<prefix>outcomes``."""
        return self.prefix + "outcomes"

    @property
    def topics(self) -> str:
        """The SET of known topics: ``<prefix>topics`` (both layouts; the
        server keeps it)."""
        return self.prefix + "topics"

    @property
    def due(self) -> str:
        """The per-topic layout's index, the server's: ZSET topic -> the
        earliest time it needs the server (Unix seconds): ``<prefix>due``."""
        return self.prefix + "due"

    def __repr__(self) -> str:
        if self.layout == CLASSIC:
            return f"Keys({self.prefix!r})"
        return f"Keys({self.prefix!r}, {self.layout!r})"


def _quoted(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def check_layout(value: object) -> str:
    """Check a key layout: ``"classic"`` (Delayer 1.x's) or ``"topic"`` (per-topic)."""
    if not isinstance(value, str) or value not in LAYOUTS:
        raise InvalidArgument(f"layout must be one of {', '.join(LAYOUTS)}, not {value!r}")
    return value


def check_prefix(value: object, layout: str = CLASSIC) -> str:
    """Check a key prefix: any ``str`` (prepended as is); in the per-topic
    layout without ``{`` or ``}``, which would move every key's hash tag."""
    if not isinstance(value, str):
        raise InvalidArgument(f"prefix must be a str, not {type(value).__name__}")
    if layout == TOPIC and ("{" in value or "}" in value):
        raise InvalidArgument(f'prefix {_quoted(value)} may not contain "{{" or "}}" in the per-topic layout')
    return value


def check_topic(value: object, layout: str) -> str:
    """Check a topic (:func:`~delayer._rules.check_name`); in the per-topic
    layout it is a hash tag, so ``{`` and ``}`` are refused too."""
    topic = check_name("topic", value)
    if layout == TOPIC and ("{" in topic or "}" in topic):
        raise InvalidArgument(f'topic {_quoted(topic)} may not contain "{{" or "}}" in the per-topic layout')
    return topic
