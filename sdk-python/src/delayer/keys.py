"""Redis key names of the Delayer protocol (docs/PROTOCOL.md, "Keys" and
"The per-topic layout").

The only module that knows the layouts: it builds every key name (and the
wake channel's), picks each layout's scripts and says what a topic must be.
Scripts get each name as a key, or a per-kind ``*_prefix``; a call builder takes
its names and scripts from :meth:`Keys.names`, never asking for the layout.
"""

from __future__ import annotations

import json

from typing import NamedTuple, Optional, Tuple

from . import scripts
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
    """The names (and scripts) every call on one topic needs: in the classic layout
    mostly shared by all topics, in the per-topic layout ``<prefix>{<topic>}:<kind>``.
    The classic layout's id-only calls know no topic: ``ready``, ``dead`` "".
    (What each key holds: the properties of :class:`Keys`.)"""

    pool: str
    bucket_prefix: str
    ready: str
    reserved: str
    malformed: str
    receipt_seq: str
    dead: str
    #: The scheduled counts, the classic scripts' last key (none per topic: a pool is its count).
    counts: Tuple[str, ...]
    #: The scripts of the calls whose work differs by layout: push.lua or push_topic.lua, and so on.
    push_script: str
    push_many_script: str
    remove_script: str
    dead_script: str
    release_script: str
    #: release's KEYS[4] (the scheduled counts; per topic the topic's dead list), and its ARGV before the action.
    release4: str
    release_head: Tuple[str, ...]
    outcomes: str
    #: The topic's flow-control HASH (field ``paused``) and the LIST a paused topic's waits block on.
    flow: str
    gate: str
    #: What a classic flow pool's name starts with (``<prefix>flow_pool:``; a paused
    #: topic's due ids set aside), "" per topic (held jobs stay in the pool):
    #: reschedule.lua's and lookup.lua's last argument.
    flow_pool_prefix: str
    #: remove.lua's (classic) arguments after the id: the flow-pool prefix; none for remove_topic.lua.
    remove_tail: Tuple[str, ...]
    #: flow.lua or flow_topic.lua (read, pause, resume), and its KEYS after the flow hash and the gate:
    #: the classic ``flow_topics`` and flow pool; per topic, the topic's pool.
    flow_script: str
    flow_tail: Tuple[str, ...]

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
                              dead=tag + "dead", counts=(), push_script=scripts.PUSH_TOPIC,
                              push_many_script=scripts.PUSH_MANY_TOPIC, remove_script=scripts.REMOVE_TOPIC,
                              dead_script=scripts.DEAD_TOPIC, release_script=scripts.RELEASE_TOPIC,
                              release4=tag + "dead", release_head=(tag + "job:",), outcomes=tag + "outcomes",
                              flow=tag + "flow", gate=tag + "gate", flow_pool_prefix="", remove_tail=(),
                              flow_script=scripts.FLOW_TOPIC, flow_tail=(tag + "pool",))
        return TopicNames(pool=self.job_pool, bucket_prefix=self.bucket_prefix,
                          ready="" if topic is None else self.ready_queue(topic), reserved=self.reserved,
                          malformed=self.malformed, receipt_seq=self.receipt_seq,
                          dead="" if topic is None else self.dead(topic), counts=(self.scheduled_count,),
                          push_script=scripts.PUSH, push_many_script=scripts.PUSH_MANY, remove_script=scripts.REMOVE,
                          dead_script=scripts.DEAD, release_script=scripts.RELEASE, release4=self.scheduled_count,
                          release_head=(self.bucket_prefix, self.dead_prefix), outcomes=self.outcomes,
                          flow="" if topic is None else self.flow(topic),
                          gate="" if topic is None else self.gate(topic),
                          flow_pool_prefix=self.flow_pool_prefix, remove_tail=(self.flow_pool_prefix,),
                          flow_script=scripts.FLOW,
                          flow_tail=(self.flow_topics, "" if topic is None else self.flow_pool(topic)))

    def topic(self, value: object) -> str:
        """Check a topic in this layout (:func:`check_topic`)."""
        return check_topic(value, self.layout)

    def scope(self, topic: object) -> Optional[str]:
        """The topic whose names a call about a job of ``topic`` uses: the topic
        (checked) per topic; None in the classic layout (shared names, global ids)."""
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
        """The pub/sub channel (not a key) where scripts announce ``"<time>
        <topic>"`` for the server's wake-ups and index: ``<prefix>wake``."""
        return self.prefix + "wake"

    @property
    def dead_prefix(self) -> str:
        """What every dead-letter list's name starts with: ``<prefix>dead:``."""
        return self.prefix + "dead:"

    def dead(self, topic: str) -> str:
        """The LIST of one topic's dead letters, newest at the left: ``<prefix>dead:<topic>``."""
        return self.dead_prefix + topic

    def flow(self, topic: str) -> str:
        """The HASH of one topic's flow control (``paused``: since when; absent:
        running), read by every hand-out script: ``<prefix>flow:<topic>``."""
        return self.flow_prefix + topic

    @property
    def flow_prefix(self) -> str:
        """What every flow hash's name starts with: ``<prefix>flow:`` (stats.lua's ARGV[5])."""
        return self.prefix + "flow:"

    def gate(self, topic: str) -> str:
        """The LIST a paused topic's waits block on (absent while paused, written
        by a resume): ``<prefix>flow_gate:<topic>``."""
        return self.prefix + "flow_gate:" + topic

    def flow_pool(self, topic: str) -> str:
        """The ZSET of one topic's due ids set aside while it is paused or rate
        limited (score: due time, s): ``<prefix>flow_pool:<topic>``."""
        return self.flow_pool_prefix + topic

    @property
    def flow_pool_prefix(self) -> str:
        """What every flow pool's name starts with: ``<prefix>flow_pool:``."""
        return self.prefix + "flow_pool:"

    @property
    def flow_topics(self) -> str:
        """The SET of topics under flow control, or whose flow pool still holds
        ids: ``<prefix>flow_topics``."""
        return self.prefix + "flow_topics"

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
