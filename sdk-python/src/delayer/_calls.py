"""The KEYS and ARGV of every script call, from checked arguments: the
Python SDK's one translation of the scripts' headers (``lua/*.lua``, which
say what each takes). A built call may be sent: its arguments passed the
input rules (:mod:`delayer._rules`); names, and the scripts whose work
differs by layout, come from :mod:`delayer.keys`, which alone knows the layouts.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import scripts
from ._rules import MAX_POSITION, check_if_absent, check_max_attempts, check_name, count, delay_ms, encode_body
from ._rules import burst_text, lifetime_ms, rate_text, ttr_ms, utf8
from ._trace import outgoing
from .errors import InvalidArgument
from .keys import Keys, TopicNames
from .models import Backoff, Job, ReservedMessage

#: How many jobs one push_many.lua call takes (the script's limit).
JOBS_PER_CALL = 100
#: How many push_many.lua calls ``push_many`` pipelines per round trip.
CALLS_PER_PIPELINE = 10
#: How many ARGV values push_many.lua takes per job.
VALUES_PER_JOB = 10
#: How many ARGV values come before the jobs in a push_many.lua call.
PUSH_MANY_HEAD = 3
#: The most dead letters one dead.lua call takes: no call holds Redis for long.
DEAD_BATCH = 1000
#: The most jobs one reserve.lua call reserves (its limit), and acks it takes.
RESERVE_BATCH = 1000
#: Bytes of an error text release.lua keeps: cut here first, on a character boundary.
ERROR_TEXT_LIMIT = 1000

Arg = Union[str, bytes, int]


class ScriptCall(NamedTuple):
    """One script call: the script's name (:mod:`delayer.scripts`), its KEYS and ARGV."""

    script: str
    keys: List[str]
    args: List[Arg]


def _retry_args(max_attempts: object, backoff: object) -> List[Arg]:
    """push.lua's ARGV[6..9]: max_attempts, backoff kind, ms, max ms ("" = not set)."""
    args: List[Arg] = ["" if max_attempts is None else check_max_attempts(max_attempts)]
    if backoff is None:
        args += ["", "", ""]
    elif isinstance(backoff, Backoff):
        args += [backoff.kind, backoff.backoff_ms, backoff.backoff_max_ms]
    else:
        raise InvalidArgument(
            f"backoff must be a delayer.Backoff (Backoff.fixed / Backoff.exponential), not {type(backoff).__name__}"
        )
    return args


def push_call(keys: Keys, topic: object, job_id: object, delay: object, body: object, ready_max_lifetime: object,
              max_attempts: object = None, backoff: object = None, if_absent: object = False,
              traceparent: object = None) -> ScriptCall:
    """Check one push; its push.lua (push_topic.lua) call (traceparent None: OpenTelemetry's current one, if any)."""
    topic_s = keys.topic(topic)
    id_s = check_name("id", job_id)
    ms = delay_ms(delay)
    life = lifetime_ms(ready_max_lifetime)
    data = encode_body(body)
    n = keys.names(topic_s)
    args: List[Arg] = [id_s, topic_s, data, ms, life]
    args += _retry_args(max_attempts, backoff)
    args += [check_if_absent(if_absent), keys.wake, outgoing(traceparent)]
    return ScriptCall(n.push_script, [n.pool, n.bucket(id_s), *n.counts], args)


class Batches(NamedTuple):
    """push_many.lua calls; ``order[k]`` is the input index of their k-th job."""

    calls: List[ScriptCall]
    order: List[int]


def push_many_batches(keys: Keys, jobs: object, if_absent: object = False) -> Batches:
    """Check every job of a ``push_many``, then build its push_many.lua calls
    (:data:`JOBS_PER_CALL` jobs each, grouped by :meth:`~delayer.keys.Keys.scope`:
    per topic, push_many_topic.lua calls whose jobs share one topic's keys)."""
    policy = check_if_absent(if_absent)
    try:
        items = list(jobs)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgument(f"jobs must be an iterable of Job, not {type(jobs).__name__}") from None
    groups: Dict[Optional[str], List[Tuple[int, ScriptCall]]] = {}
    for i, job in enumerate(items):
        if not isinstance(job, Job):
            raise InvalidArgument(f"jobs[{i}] must be a delayer.Job, not {type(job).__name__}")
        try:
            push = push_call(keys, job.topic, job.id, job.delay, job.body, job.ready_max_lifetime, job.max_attempts,
                             job.backoff, traceparent=job.traceparent)
        except InvalidArgument as e:
            raise InvalidArgument(f"jobs[{i}]: {e}") from None
        groups.setdefault(keys.scope(push.args[1]), []).append((i, push))
    calls = []
    order: List[int] = []
    for topic, pushes in groups.items():
        n = keys.names(topic)
        for start in range(0, len(pushes), JOBS_PER_CALL):
            args: List[Arg] = [n.bucket_prefix, policy, keys.wake]
            for i, push in pushes[start : start + JOBS_PER_CALL]:
                args.extend(push.args[: VALUES_PER_JOB - 1])  # push.lua's first nine ARGV
                args.append(push.args[-1])  # and its traceparent
                order.append(i)
            calls.append(ScriptCall(n.push_many_script, [n.pool, *n.counts], args))
    return Batches(calls, order)


def push_many_ids(call: ScriptCall) -> List[str]:
    """The ids of a push_many.lua call's jobs, in order."""
    return [str(a) for a in call.args[PUSH_MANY_HEAD::VALUES_PER_JOB]]


def chunks(calls: Sequence[ScriptCall], size: int = CALLS_PER_PIPELINE) -> List[Sequence[ScriptCall]]:
    """Split ``calls`` into pipeline-sized pieces."""
    return [calls[i : i + size] for i in range(0, len(calls), size)]


def pop_call(keys: Keys, topic: object) -> ScriptCall:
    """Check a pop; its pop.lua call, whose KEYS[0] ``bpop`` waits on."""
    n = keys.names(keys.topic(topic))
    return ScriptCall(scripts.POP, [n.ready, n.malformed, n.pool, n.reserved, n.flow, n.gate], [n.bucket_prefix])


def take_call(keys: Keys, topic: str, job_id: str) -> ScriptCall:
    """The take.lua call for an id BRPOP just took from ``topic``'s ready list
    (which it names: a paused topic's id goes back there)."""
    n = keys.names(topic)
    return ScriptCall(scripts.TAKE, [n.bucket(job_id), n.malformed, n.pool, n.reserved, n.ready, n.flow, n.gate],
                      [job_id])


def remove_call(keys: Keys, job_id: object, topic: object = None) -> ScriptCall:
    """Check a remove; its remove.lua (remove_topic.lua) call."""
    i = check_name("id", job_id)
    n = keys.id_names(topic, "remove() needs the topic in the per-topic layout: remove(id, topic=...)")
    return ScriptCall(n.remove_script, [n.pool, n.bucket(i), *n.counts], [i, *n.remove_tail])


def reserve_call(keys: Keys, topic: object, ttr: object) -> ScriptCall:
    """Check a reserve; its reserve.lua call (one job), whose KEYS[0] ``breserve`` waits on."""
    n = keys.names(keys.topic(topic))
    ms = ttr_ms(ttr)
    keys_ = [n.ready, n.reserved, n.malformed, n.receipt_seq, n.pool, n.outcomes, n.flow, n.gate]
    return ScriptCall(scripts.RESERVE, keys_, [n.bucket_prefix, ms, "", keys.wake])


class ReserveMany(NamedTuple):
    """A ``reserve_many``'s reserve.lua calls: ``calls[0]`` reserves when
    ``reserves``; the others only ack, one per other scope of the acks.
    ``acks[i]`` is ``(call, position)`` of the i-th ack's result."""

    calls: List[ScriptCall]
    reserves: bool
    acks: List[Tuple[int, int]]


def reserve_many_calls(keys: Keys, topic: object, ttr: object, n: object, acks: object) -> ReserveMany:
    """Check a ``reserve_many``; its reserve.lua calls in batch mode. An ack
    is a :class:`ReservedMessage` (of its topic), or an id or ``(id,
    receipt)`` of ``topic``; no call for ``topic`` when it neither reserves
    nor acks there."""
    call = reserve_call(keys, topic, ttr)
    t = keys.topic(topic)
    most = count("n", n, 0, RESERVE_BATCH)
    if isinstance(acks, (str, bytes, bytearray, memoryview, ReservedMessage)):
        raise InvalidArgument("acks must be an iterable of jobs to ack (wrap one job in a list)")
    try:
        items = list(acks)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgument(f"acks must be an iterable of jobs to ack, not {type(acks).__name__}") from None
    if len(items) > RESERVE_BATCH:
        raise InvalidArgument(f"acks holds {len(items)} jobs; at most {RESERVE_BATCH} per call")
    # topic -> its (id, receipt) pairs; the call's own topic first.
    groups: Dict[str, List[Tuple[str, str]]] = {t: []}
    where: List[Tuple[str, int]] = []
    for i, item in enumerate(items):
        try:
            if isinstance(item, tuple):
                if len(item) != 2:
                    raise InvalidArgument("a pair must be (id, receipt)")
                job_id, receipt = _held(item[0], item[1])
                of = t
            else:
                job_id, receipt = _held(item, None)
                # Classic ids are global (no scope): every ack goes in the one call.
                of = (keys.scope(item.topic) if isinstance(item, ReservedMessage) else None) or t
        except InvalidArgument as e:
            raise InvalidArgument(f"acks[{i}]: {e}") from None
        group = groups.setdefault(of, [])
        where.append((of, len(group)))
        group.append((job_id, receipt))
    reserves = most > 0 or bool(groups[t])
    calls: List[ScriptCall] = []
    index: Dict[str, int] = {}
    for of, pairs in groups.items():
        if of == t and not reserves:
            continue
        base = call if of == t else reserve_call(keys, of, ttr)
        args: List[Arg] = [*base.args[:2], most if of == t else 0]
        for job_id, receipt in pairs:
            args += [job_id, receipt]
        args.append(keys.wake)
        index[of] = len(calls)
        calls.append(ScriptCall(base.script, base.keys, args))
    return ReserveMany(calls, reserves, [(index[of], k) for of, k in where])


def error_text(error: object) -> str:
    """Check a release's or bury's error text (None: none); cut to :data:`ERROR_TEXT_LIMIT` bytes."""
    if error is None:
        return ""
    if not isinstance(error, str):
        raise InvalidArgument(f"error must be a str or None, not {type(error).__name__}")
    return utf8("error", error)[:ERROR_TEXT_LIMIT].decode("utf-8", "ignore")


def _held(job: object, receipt: object) -> Tuple[str, str]:
    """The id and receipt (``""``: whichever reservation is current) of a
    ReservedMessage, or of an id and the receipt, if the caller knows it."""
    if isinstance(job, ReservedMessage):
        if receipt is not None:
            raise InvalidArgument("receipt= is for a job given by id; a ReservedMessage carries its own")
        if not isinstance(job.receipt, str) or job.receipt == "":
            raise InvalidArgument("the ReservedMessage has no receipt")
        receipt = job.receipt
        job = job.id
    elif not isinstance(job, str):
        raise InvalidArgument(f"job must be a ReservedMessage or an id (str), not {type(job).__name__}")
    job_id = check_name("id", job)
    if receipt is None:
        return job_id, ""
    if not isinstance(receipt, str):
        raise InvalidArgument(f"receipt must be a str, not {type(receipt).__name__}")
    if receipt == "":
        raise InvalidArgument('receipt must not be empty: pass None for "whichever reservation is current"')
    utf8("receipt", receipt)
    return job_id, receipt


def _held_names(keys: Keys, job: object, receipt: object, topic: object, form: str) -> Tuple[str, str, TopicNames]:
    """:func:`_held`, and the names of the job's topic (a ReservedMessage's, or ``topic=``)."""
    job_id, r = _held(job, receipt)
    if isinstance(job, ReservedMessage):
        if topic is not None:
            raise InvalidArgument("topic= is for a job given by id; a ReservedMessage carries its own")
        return job_id, r, keys.names(keys.scope(job.topic))
    name = form[: form.index("(")]
    usage = f"{name}() needs the topic in the per-topic layout: {name}(job) with the reserved job, or {form}"
    return job_id, r, keys.id_names(topic, usage)


def ack_call(keys: Keys, job: object, receipt: object, topic: object = None) -> ScriptCall:
    """Check an ack; its ack.lua call."""
    job_id, r, n = _held_names(keys, job, receipt, topic, "ack(id, receipt, topic=...)")
    return ScriptCall(scripts.ACK, [n.reserved, n.bucket(job_id), n.pool, n.outcomes], [job_id, r])


def touch_call(keys: Keys, job: object, ttr: object, receipt: object, topic: object = None) -> ScriptCall:
    """Check a touch; its touch.lua call."""
    job_id, r, n = _held_names(keys, job, receipt, topic, "touch(id, ttr, receipt, topic=...)")
    return ScriptCall(scripts.TOUCH, [n.reserved, n.bucket(job_id), n.pool], [job_id, r, ttr_ms(ttr), keys.wake])


def _release_call(
    keys: Keys, job: object, receipt: object, action: Arg, error: object, topic: object, form: str
) -> ScriptCall:
    job_id, r, n = _held_names(keys, job, receipt, topic, form)
    why = error_text(error)
    # "held": end this one reservation ("expired" is the server's); the error text, last, becomes last_error.
    args: List[Arg] = [*n.release_head, action, "held", job_id, r, keys.wake, why]
    return ScriptCall(n.release_script, [n.reserved, n.pool, n.malformed, n.release4, n.outcomes], args)


def release_call(keys: Keys, job: object, delay: object, receipt: object, error: object = None,
                 topic: object = None) -> ScriptCall:
    """Check a release (no ``delay``: the job's backoff); its release.lua (release_topic.lua) call."""
    action: Arg = "backoff" if delay is None else delay_ms(delay)
    return _release_call(keys, job, receipt, action, error, topic, "release(id, delay, receipt, topic=...)")


def bury_call(keys: Keys, job: object, receipt: object, error: object = None, topic: object = None) -> ScriptCall:
    """Check a bury; its release.lua (release_topic.lua) call."""
    return _release_call(keys, job, receipt, "bury", error, topic, "bury(id, receipt, topic=...)")


def reschedule_call(keys: Keys, job_id: object, delay: object, topic: object = None) -> ScriptCall:
    """Check a reschedule; its reschedule.lua call."""
    i = check_name("id", job_id)
    n = keys.id_names(topic, "reschedule() needs the topic in the per-topic layout: reschedule(id, delay, topic=...)")
    return ScriptCall(scripts.RESCHEDULE, [n.pool, n.bucket(i)], [i, delay_ms(delay), keys.wake, n.flow_pool_prefix])


#: flow.lua's actions (ARGV[2]).
FLOW_ACTIONS = ("get", "pause", "resume", "limit", "unlimit")


def flow_call(keys: Keys, topic: object, action: str, per_second: object = None, burst: object = None) -> ScriptCall:
    """Check a topic's flow read, pause, resume, limit or unlimit (``action``:
    one of :data:`FLOW_ACTIONS`); its flow.lua (flow_topic.lua) call. Only
    ``"limit"`` sends ``per_second`` and ``burst`` (ARGV[4] and ARGV[5], ``""``
    when unused); the script checks the limit's values."""
    if action not in FLOW_ACTIONS:
        raise ValueError(f"flow.lua takes {', '.join(FLOW_ACTIONS)}, not {action!r}")
    t = keys.topic(topic)
    rate, most = (rate_text(per_second), burst_text(burst)) if action == "limit" else ("", "")
    n = keys.names(t)
    return ScriptCall(n.flow_script, [n.flow, n.gate, *n.flow_tail], [t, action, keys.wake, rate, most])


def dead_list_call(keys: Keys, topic: object, start: object, how_many: object) -> ScriptCall:
    """Check a dead-letter listing; its dead.lua (dead_topic.lua) call."""
    t = keys.topic(topic)
    first = count("start", start, 0, MAX_POSITION)
    most = count("count", how_many, 1, DEAD_BATCH)
    n = keys.names(t)
    return ScriptCall(n.dead_script, [n.dead, n.pool, *n.counts], [n.bucket_prefix, t, "list", first, most])


def dead_take_calls(keys: Keys, action: str, topic: object,
                    ids: object) -> Tuple[Optional[ScriptCall], List[ScriptCall]]:
    """Check a re-queue or purge (``action``) of dead letters: ``(every, by_ids)``.
    ``ids`` None (all): ``every`` takes :data:`DEAD_BATCH` of the oldest, to
    repeat until a call takes fewer; else one call per :data:`DEAD_BATCH` ids."""
    if action not in ("requeue", "purge"):
        raise ValueError(f"dead.lua takes requeue or purge here, not {action!r}")
    # A re-queue names the wake channel after its action: it announces the jobs it makes due.
    said = f"requeue {keys.wake}" if action == "requeue" else action
    t = keys.topic(topic)
    names = keys.names(t)
    call_keys = [names.dead, names.pool, *names.counts]
    if ids is None:
        return ScriptCall(names.dead_script, call_keys, [names.bucket_prefix, t, said, DEAD_BATCH]), []
    if isinstance(ids, (str, bytes, bytearray, memoryview)):
        raise InvalidArgument("ids must be an iterable of ids (a str is one id: wrap it in a list)")
    try:
        items = list(ids)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgument(f"ids must be an iterable of ids or None (all), not {type(ids).__name__}") from None
    checked = []
    for k, item in enumerate(items):
        try:
            checked.append(check_name("id", item))
        except InvalidArgument as e:
            raise InvalidArgument(f"ids[{k}]: {e}") from None
    calls = []
    for start in range(0, len(checked), DEAD_BATCH):
        part = checked[start : start + DEAD_BATCH]
        # ARGV[4] (a count) is ignored when ids follow; it says how many.
        calls.append(ScriptCall(names.dead_script, call_keys, [names.bucket_prefix, t, said, len(part), *part]))
    return None, calls
