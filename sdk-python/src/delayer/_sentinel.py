"""Redis Sentinel: the clients that follow the master.

A failover moves the master, so in sentinel mode no address is configured:
redis-py's Sentinel support asks the sentinels for the master at every new
connection, and turns a demoted master's ``READONLY`` into a connection
error (the SDK then sends the call once more, on a new connection, to the
new master).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _waits
from ._connect import CONNECT_TIMEOUT, auth, client_options, ssl_and_checked
from .errors import InvalidArgument

Node = Tuple[str, int]


def parse_nodes(text: str) -> List[Node]:
    """``host:port,host:port,...`` (``[::1]:26379`` for IPv6); raises
    ValueError with the first entry that is not ``host:port``."""
    nodes: List[Node] = []
    for entry in (e.strip() for e in text.split(",")):
        host, sep, port = entry.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        ok = sep and host and port.isascii() and port.isdigit() and 0 < int(port) < 65536
        if not ok or any(c in host for c in " []"):
            raise ValueError(entry)
        nodes.append((host, int(port)))
    return nodes


def check_nodes(nodes: Union[str, Sequence[Any]], name: str = "sentinels", what: str = "sentinel") -> List[Node]:
    """``sentinels=`` (or ``cluster=``: ``name``, each node a ``what``) as
    given to a constructor: a ``host:port,...`` string or (host, port) pairs."""
    if isinstance(nodes, str):
        try:
            return parse_nodes(nodes)
        except ValueError as bad:
            raise InvalidArgument(f"{name}: {str(bad)!r} is not host:port") from None
    out: List[Node] = []
    for node in nodes:
        if not (isinstance(node, (tuple, list)) and len(node) == 2 and isinstance(node[0], str)
                and isinstance(node[1], int) and 0 < node[1] < 65536):
            raise InvalidArgument(f"{name}: {node!r} is not a (host, port) pair")
        out.append((node[0], node[1]))
    if not out:
        raise InvalidArgument(f"{name}: at least one {what} is needed")
    return out


def open_clients(sentinel_class: Any, client_class: Any, retry: object, nodes: List[Node], master_name: object,
                 database: object, credentials: Tuple[Optional[str], Optional[str], Optional[str], Optional[str]],
                 tls: bool, tls_files: Tuple[object, object, object]) -> Tuple[Any, Any, List[str]]:
    """The clients for calls and for blocking waits, on the master the sentinels name, and the secrets."""
    if not isinstance(master_name, str) or not master_name:
        raise InvalidArgument("sentinels= needs master_name (the name the sentinels monitor)")
    if not isinstance(database, int) or database < 0:
        raise InvalidArgument("database must be an integer, 0 or more")
    username, password, s_username, s_password = credentials
    names = ("username", "password", "sentinel_username", "sentinel_password")
    ssl = ssl_and_checked(dict(zip(names, credentials)), tls, tls_files)
    sentinel_kwargs = {"socket_connect_timeout": CONNECT_TIMEOUT, "socket_timeout": CONNECT_TIMEOUT,
                       **auth(s_username, s_password), **ssl}
    sentinel = sentinel_class(nodes, sentinel_kwargs=sentinel_kwargs)
    common = {"db": database, **auth(username, password), **ssl}
    made = sentinel.master_for(master_name, redis_class=client_class, **common, **client_options(retry))
    wait_kwargs = _waits.connection_kwargs(client_options(retry))
    waiter = sentinel.master_for(master_name, redis_class=client_class, **common, **wait_kwargs)
    secrets = [s for s in (password, s_password) if s]
    return made, waiter, secrets
