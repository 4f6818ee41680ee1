"""Redis key names of the Delayer protocol (docs/PROTOCOL.md, "Keys").

This is the only module that builds key names (and the name of the one pub/sub
channel), so a later layout (for example per-topic hash tags for Redis
Cluster) changes one place. Scripts get each name they touch as a key, or as
a per-kind prefix (``*_prefix``) for names that depend on data they read; they
never build one themselves.
"""

from __future__ import annotations

__all__ = ["Keys", "DEFAULT_PREFIX"]

#: The key prefix used when none is configured.
DEFAULT_PREFIX = "delayer:"


class Keys:
    """Key names under one prefix, which is prepended as is.

    >>> Keys("shop:delayer:").job_pool
    'shop:delayer:job_pool'
    """

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        """Build key names under ``prefix`` (e.g. ``"delayer:"``)."""
        self.prefix: str = prefix

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
        """The pub/sub channel on which scripts announce an earlier due time: ``<prefix>wake``.

        A channel, not a key: push, push_many, release and reschedule publish
        the new due time there when it comes before the pool's earliest, so a
        sleeping server wakes for it.
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
    def topics(self) -> str:
        """The SET of the topics the server has moved jobs of: ``<prefix>topics``."""
        return self.prefix + "topics"

    def __repr__(self) -> str:
        return f"Keys({self.prefix!r})"
