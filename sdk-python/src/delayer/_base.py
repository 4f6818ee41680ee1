"""What the sync and asyncio clients share beyond their operations: the
constructor, ``from_config``, the properties and ``repr``. Each client adds
a :class:`Flavour` (its redis-py classes) and only I/O.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Dict, Generic, List, NamedTuple, Optional, Sequence, Tuple, Type, TypeVar, Union

from redis.backoff import NoBackoff

from . import _cluster, _connect, _sentinel, _waits, config
from ._translate import Guard
from .errors import InvalidArgument
from .keys import CLASSIC, DEFAULT_PREFIX, TOPIC, Keys, check_layout, check_prefix

PathArg = Union[str, "os.PathLike[str]"]

R = TypeVar("R")  # the redis-py client: redis.Redis or redis.asyncio.Redis
D = TypeVar("D", bound="ClientBase[Any]")


class Flavour(NamedTuple):
    """The redis-py classes of one kind of client, sync or asyncio, and how messages name it."""

    client_class: Type[Any]
    pool_class: Type[Any]
    retry_class: Type[Any]
    name: str


class ClientBase(Generic[R]):
    """The shared half of :class:`delayer.Delayer` and :class:`delayer.aio.Delayer`."""

    _flavour: ClassVar[Flavour]

    def __init__(self, url: Optional[str] = None, prefix: str = DEFAULT_PREFIX, *, client: Optional[R] = None,
                 username: Optional[str] = None, password: Optional[str] = None, tls_ca_file: Optional[PathArg] = None,
                 tls_cert_file: Optional[PathArg] = None, tls_key_file: Optional[PathArg] = None,
                 sentinels: Union[str, Sequence[Tuple[str, int]], None] = None, master_name: Optional[str] = None,
                 database: int = 0, sentinel_username: Optional[str] = None, sentinel_password: Optional[str] = None,
                 tls: bool = False, layout: Optional[str] = None,
                 cluster: Union[str, Sequence[Tuple[str, int]], None] = None) -> None:
        """Create a client for ``url`` (or ``client``) with key prefix ``prefix``.

        ``url`` is ``redis://[user:password@]host:port/db``, ``rediss://...``
        (TLS) or ``unix:///path/to/redis.sock`` (also ``redis+unix://``).
        ``username`` / ``password``, when given, override the URL's. With
        ``rediss://``, ``tls_ca_file`` (PEM) is the CA to trust instead of the
        system's, and ``tls_cert_file`` + ``tls_key_file`` a client
        certificate and its key (mutual TLS). These options are for ``url``
        only, not for ``client=``.

        Redis Sentinel: ``sentinels`` (``"host:port,host:port"`` or (host,
        port) pairs) and ``master_name`` instead of ``url``; ``database``,
        ``username``, ``password`` and ``tls_*`` are the master's,
        ``sentinel_username`` / ``sentinel_password`` the sentinels', ``tls``
        turns TLS on for both. Every new connection goes to the master the
        sentinels name, so the client follows a failover.

        Redis Cluster: ``cluster`` (the seed nodes, ``"host:port,host:port"``
        or (host, port) pairs) instead of ``url``; ``username``,
        ``password``, ``tls`` and ``tls_*`` as with sentinels. The layout is
        then ``"topic"`` (the only one a cluster can hold).

        ``layout``: the key layout the server moves (``[delayer] layout``):
        ``"classic"`` (Delayer 1.x's, the default) or ``"topic"`` (the
        per-topic layout: ids are per topic, and ``{`` / ``}`` may appear in
        neither the prefix nor a topic).
        """
        flavour = self._flavour
        #: Times a call found its connection gone and made a new one (a Worker
        #: then reads the eviction policy again: delayer._eviction).
        self._reconnects = 0
        if cluster is not None and layout not in (None, TOPIC):
            raise InvalidArgument(f"cluster= needs layout={TOPIC!r} (the classic layout keeps every job in one key)")
        checked = check_layout(layout if layout is not None else TOPIC if cluster is not None else CLASSIC)
        self._keys = Keys(check_prefix(prefix, checked), checked)
        secrets: List[str] = []
        waiter: Optional[R] = None
        #: Cluster mode: the calls that are not one script call go their own way (:mod:`delayer._cluster`).
        self._cluster = cluster is not None
        #: Cluster mode: plain clients of single nodes (durable pushes), by (host, port).
        self._nodes: Dict[Tuple[str, int], R] = {}
        self._node_options: Dict[str, Any] = {}
        if cluster is not None:
            if url is not None or client is not None or sentinels is not None:
                raise InvalidArgument("cluster= finds the masters itself: give neither url=, client= nor sentinels=")
            if master_name is not None or sentinel_username is not None or sentinel_password is not None:
                raise InvalidArgument("master_name, sentinel_username and sentinel_password go with sentinels=")
            if database != 0:
                raise InvalidArgument("database: Redis Cluster has only database 0")
            nodes = _sentinel.check_nodes(cluster, "cluster", "seed node")
            opened = _cluster.open_clients(flavour.client_class.__module__.startswith("redis.asyncio"), nodes, username,
                                           password, tls, (tls_ca_file, tls_cert_file, tls_key_file))
            self._owns_client = True
            self._redis: R = opened.calls
            self._where = _cluster.describe(nodes)
            self._guard = Guard(self._where, opened.secrets, bool(password))
            self._waiter: R = opened.waits
            self._node_options = opened.node_options
            return
        if sentinels is not None:
            if url is not None or client is not None:
                raise InvalidArgument("sentinels= finds the master itself: give neither url= nor client=")
            made, waiter, secrets = _sentinel.open_clients(_sentinel_class(flavour), flavour.client_class,
                                                           flavour.retry_class(NoBackoff(), 0),
                                                           _sentinel.check_nodes(sentinels), master_name, database,
                                                           (username, password, sentinel_username, sentinel_password),
                                                           tls, (tls_ca_file, tls_cert_file, tls_key_file))
            self._owns_client = True
        elif master_name is not None or sentinel_username is not None or sentinel_password is not None or tls:
            raise InvalidArgument("master_name, sentinel_username, sentinel_password and tls go with sentinels=")
        elif database != 0:
            raise InvalidArgument("database goes with sentinels=; with url= it is the URL's path (/0)")
        elif client is None:
            made, secrets = _connect.open_client(flavour.client_class.from_url, flavour.retry_class,
                                                 url if url is not None else _connect.DEFAULT_URL, password,
                                                 (tls_ca_file, tls_cert_file, tls_key_file))
            _connect.set_credentials(made.connection_pool.connection_kwargs, username, password)
            self._owns_client = True
        else:
            _connect.reject_url_options(username, password, tls_ca_file, tls_cert_file, tls_key_file)
            if not isinstance(client, flavour.client_class):
                raise InvalidArgument(f"client must be a {flavour.name}, not {type(client).__name__}")
            made = client
            self._owns_client = False
        pool = made.connection_pool
        kwargs: Dict[str, Any] = dict(pool.connection_kwargs)
        _connect.check_binary(kwargs)
        where, more = _connect.describe(kwargs)
        if sentinels is not None:
            where = f"the master {master_name!r} of the sentinels"
        self._redis = made
        self._where = where
        # credentials from a provider (redis-py 5+) are not in the kwargs
        has_password = bool(kwargs.get("password") or kwargs.get("credential_provider"))
        self._guard = Guard(where, secrets + more, has_password)
        # bpop and breserve wait on connections of their own, whose read
        # timeout outlasts a wait whatever the client's socket timeout.
        self._waiter = waiter if waiter is not None else flavour.client_class(
            connection_pool=flavour.pool_class(connection_class=pool.connection_class,
                                               **_waits.connection_kwargs(kwargs))
        )

    def _node(self, host: str, port: int) -> R:
        """A plain client of the cluster node at host:port (made once, closed with this client)."""
        node = self._nodes.get((host, port))
        if node is None:  # made lazily (connects at its first command): a lost race leaves nothing open
            node = self._nodes.setdefault((host, port),
                                          self._flavour.client_class(host=host, port=port, **self._node_options))
        return node

    @classmethod
    def from_config(cls: Type[D], path: PathArg) -> D:
        """Create a client from the ``delayer.conf`` file the server uses (and
        the ``DELAYER_*`` variables): its ``[redis]`` section and ``[delayer]``
        key_prefix and layout. :class:`ConfigError`, naming the file, line and
        key, for what the server refuses too."""
        s = config.load(path)
        common: Dict[str, Any] = dict(prefix=s.key_prefix, username=s.username, password=s.password,
                                      tls_ca_file=s.tls_ca_file, tls_cert_file=s.tls_cert_file,
                                      tls_key_file=s.tls_key_file, layout=s.layout)
        if s.cluster:
            return cls(cluster=s.cluster, tls=s.tls, **common)
        if s.sentinels:
            return cls(sentinels=s.sentinels, master_name=s.master_name, database=s.database, tls=s.tls,
                       sentinel_username=s.sentinel_username, sentinel_password=s.sentinel_password, **common)
        return cls(s.url if s.url is not None else _connect.tcp_url(s.host, s.port, s.database), **common)

    @property
    def keys(self) -> Keys:
        """The key names this client uses."""
        return self._keys

    @property
    def redis(self) -> R:
        """The underlying redis-py client (a ``RedisCluster`` in cluster mode)."""
        return self._redis

    def __repr__(self) -> str:
        layout = "" if self._keys.layout == CLASSIC else f", layout={self._keys.layout!r}"
        return f"{type(self).__name__}(redis={self._where!r}, prefix={self._keys.prefix!r}{layout})"


def _sentinel_class(flavour: Flavour) -> Any:
    """redis-py's Sentinel class for the client's kind, sync or asyncio."""
    if flavour.client_class.__module__.startswith("redis.asyncio"):
        from redis.asyncio.sentinel import Sentinel as AsyncSentinel

        return AsyncSentinel
    from redis.sentinel import Sentinel

    return Sentinel
