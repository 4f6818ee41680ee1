"""Redis Cluster: the redis-py ``RedisCluster`` clients a Delayer client
talks through in cluster mode.

A topic's keys share one hash slot, so redis-py routes each script call
(and follows MOVED / ASK and failovers) as any single-key command; its
cluster pipeline routes the calls of push_many and reserve_many one by one.
What needs care here: a durable push's WAIT must follow its writes on each
master written (:func:`on_nodes`), and the waits need their own client.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Generator, List, NamedTuple, Optional, Sequence, Tuple

from redis.exceptions import RedisClusterException, RedisError

from . import _waits
from ._calls import Arg
from ._connect import CONNECT_TIMEOUT, auth, ssl_and_checked
from ._send import Send, with_wait
from ._sentinel import Node
from ._translate import redirected, translate

def describe(nodes: Sequence[Node]) -> str:
    """How messages name the cluster: its seed nodes ("Redis at the cluster of ...")."""
    return "the cluster of " + ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in nodes)


def _classes(asyncio: bool) -> Tuple[Any, Any]:
    """redis-py's RedisCluster and ClusterNode, sync or asyncio."""
    if asyncio:
        from redis.asyncio.cluster import ClusterNode as AsyncNode, RedisCluster as AsyncCluster

        return AsyncCluster, AsyncNode
    from redis.cluster import ClusterNode, RedisCluster

    return RedisCluster, ClusterNode


class Clients(NamedTuple):
    """What a Delayer client in cluster mode talks through."""

    #: The ``RedisCluster`` for ordinary calls.
    calls: Any
    #: The one for blocking waits (a read timeout that outlasts a wait).
    waits: Any
    #: The secrets to hide from messages.
    secrets: List[str]
    #: How to open a plain client of one node (``redis.Redis(host, port,
    #: **options)``): a durable push's WAIT must follow its write on the same
    #: connection, which the ``RedisCluster`` does not let one choose.
    node_options: Dict[str, Any]


def open_clients(asyncio: bool, nodes: List[Node], username: Optional[str], password: Optional[str], tls: bool,
                 tls_files: Tuple[object, object, object]) -> Clients:
    """The clients of a Delayer client in cluster mode (the sync one reads
    the slots at once: an unreachable cluster is a ConnectionFailed here)."""
    ssl = ssl_and_checked({"username": username, "password": password}, tls, tls_files)
    secrets = [password] if password else []
    cluster_class, node_class = _classes(asyncio)
    common = {"decode_responses": False, **auth(username, password), **ssl}
    timeouts = {"socket_connect_timeout": CONNECT_TIMEOUT}
    try:
        made = cluster_class(startup_nodes=[node_class(h, p) for h, p in nodes], **common, **timeouts)
        waiter = cluster_class(startup_nodes=[node_class(h, p) for h, p in nodes], **common,
                               **_waits.connection_kwargs(timeouts))
    except (RedisError, RedisClusterException) as e:
        raise translate(e, describe(nodes), secrets, bool(password)) from e
    return Clients(made, waiter, secrets, {**common, **timeouts})


def key_of(command: Tuple[Arg, ...]) -> Arg:
    """The key a command is routed by: an EVAL(SHA)'s first key, else its first argument."""
    return command[3] if str(command[0]).upper() in ("EVALSHA", "EVAL") else command[1]


#: One node's part of a Send: its (host, port) and the commands to queue there.
Part = Tuple[Node, List[Tuple[Arg, ...]]]


def on_nodes(send: Send, node_of: Callable[[Any], Any]) -> Generator[Optional[Part], Any, List[Any]]:
    """A Send with WAIT on a Redis Cluster: per master holding some of its
    keys (``node_of``: redis-py's ``get_node_from_key``), its commands then
    WAIT 1 in one pipeline of a plain client of that node. Yields each
    node's part (sent the replies), or None after a MOVED / ASK (the client
    reads the slots again; those commands go once more). Returns each
    command's reply, then the fewest replicas a WAIT counted."""
    replies: List[Any] = [None] * len(send.commands)
    least: Optional[int] = None
    pending = list(range(len(send.commands)))
    for attempt in range(2):
        groups: Dict[Node, List[int]] = {}
        for k in pending:
            node = node_of(key_of(send.commands[k]))
            groups.setdefault((str(node.host), int(node.port)), []).append(k)
        moved: List[int] = []
        for where, indexes in groups.items():
            got = yield where, with_wait(Send([send.commands[k] for k in indexes], send.wait_ms))
            for k, reply in zip(indexes, got):
                if attempt == 0 and redirected(reply):
                    moved.append(k)
                replies[k] = reply
            acked = got[-1]
            if isinstance(acked, BaseException):
                raise acked
            least = int(acked) if least is None else min(least, int(acked))
        if not moved:
            break
        yield None
        pending = moved
    return [*replies, least if least is not None else 0]
