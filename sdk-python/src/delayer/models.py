"""Value types shared by the synchronous and asynchronous clients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

__all__ = ["Message", "Job", "DEFAULT_READY_MAX_LIFETIME"]

#: Default ``ready_max_lifetime``: 7 days, in seconds.
DEFAULT_READY_MAX_LIFETIME = 604800


@dataclass(frozen=True)
class Message:
    """A job handed out by ``pop`` / ``bpop``; it is gone from Redis already."""

    #: The job id given to ``push``.
    id: str
    #: The topic the job was pushed to.
    topic: str
    #: The job body, exactly the bytes pushed.
    body: bytes

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (raises ``UnicodeDecodeError`` if it is not)."""
        return self.body.decode("utf-8")


@dataclass(frozen=True)
class Job:
    """One job for ``push_many``; the fields mean what ``push``'s arguments mean."""

    #: Ready queue the job goes to when due.
    topic: str
    #: Caller-chosen job id, unique per job.
    id: str
    #: Seconds from now until the job is due (rounded to the millisecond).
    delay: float
    #: Opaque payload; ``str`` is encoded as UTF-8.
    body: Union[bytes, str] = b""
    #: Whole seconds a due job may wait in its ready queue before it expires.
    ready_max_lifetime: int = DEFAULT_READY_MAX_LIFETIME
