"""Making the redis-py client a Delayer client talks through: URL schemes,
TLS files, credentials and timeouts read as the Rust SDK reads them.
"""

from __future__ import annotations

from os import PathLike, fspath
from typing import Any, Callable, Dict, List, Mapping, MutableMapping, Optional, Tuple, TypeVar
from urllib.parse import quote, unquote, urlsplit

from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from ._translate import scrub
from .errors import ConfigError, InvalidArgument

#: The URL used when none is given.
DEFAULT_URL = "redis://127.0.0.1:6379/0"
#: Seconds to wait for a TCP connection before giving up.
CONNECT_TIMEOUT = 5.0

_Client = TypeVar("_Client")


def open_client(from_url: Callable[..., _Client], retry_class: Callable[[NoBackoff, int], object], url: object,
                password: Optional[str], tls_files: Tuple[object, object, object]) -> Tuple[_Client, List[str]]:
    """A redis-py client, sync or asyncio (``from_url`` says which), and the secrets to scrub from errors."""
    checked = redis_url(url)
    secrets = [s for s in (url_secret(checked), password) if isinstance(s, str) and s]
    options = tls_options(checked, *tls_files)
    try:
        client = from_url(checked, **options, **client_options(retry_class(NoBackoff(), 0)))
    except (ValueError, TypeError, RedisError) as e:
        raise ConfigError(f"invalid Redis URL: {scrub(str(e), secrets)}") from None
    return client, secrets


def reject_url_options(*options: object) -> None:
    """``client=`` brings its own connection: url-only options make no sense with it."""
    if any(o is not None for o in options):
        raise InvalidArgument("username, password and tls_* are options of url=, not of client=")


def client_options(retry: object) -> Dict[str, Any]:
    """Options for clients the SDK creates: fail fast, with ``retry`` (none:
    the clients decide what to send again, see ``Delayer._do_again_once``)."""
    return {"socket_connect_timeout": CONNECT_TIMEOUT, "decode_responses": False, "retry": retry}


def redis_url(url: object) -> str:
    """``url`` as redis-py takes it: ``redis+unix://`` becomes ``unix://``."""
    if not isinstance(url, str):
        raise ConfigError(f"url must be a str, not {type(url).__name__}")
    if url.startswith("redis+unix://"):
        return "unix://" + url[len("redis+unix://") :]
    return url


def tcp_url(host: str, port: int, database: int) -> str:
    """A ``redis://`` URL for host, port and database (no credentials)."""
    where = f"[{host}]" if ":" in host else quote(host, safe="")
    return f"redis://{where}:{port}/{database}"


def _readable(name: str, value: object) -> Optional[str]:
    """A certificate file option as a path that can be read, or None."""
    if value is None or value == "":
        return None
    if not isinstance(value, (str, PathLike)):
        raise ConfigError(f"{name} must be a path, not {type(value).__name__}")
    path = fspath(value)
    if not isinstance(path, str):
        raise ConfigError(f"{name} must be a str path, not {type(path).__name__}")
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise ConfigError(f"{name}: cannot read {path}: {e.strerror or e}") from None
    return path


def tls_options(url: str, ca_file: object, cert_file: object, key_file: object) -> Dict[str, Any]:
    """redis-py's ``ssl_*`` options for the certificate files (checked
    readable; used only for a ``rediss://`` URL, as in the Rust SDK)."""
    ca = _readable("tls_ca_file", ca_file)
    cert = _readable("tls_cert_file", cert_file)
    key = _readable("tls_key_file", key_file)
    if cert is not None and key is None:
        raise ConfigError("tls_cert_file needs tls_key_file too")
    if key is not None and cert is None:
        raise ConfigError("tls_key_file needs tls_cert_file too")
    if not url.startswith("rediss://"):
        return {}
    options: Dict[str, Any] = {}
    if ca is not None:
        options["ssl_ca_certs"] = ca
    if cert is not None and key is not None:
        options["ssl_certfile"] = cert
        options["ssl_keyfile"] = key
    return options


def ssl_and_checked(credentials: Dict[str, object], tls: bool,
                    tls_files: Tuple[object, object, object]) -> Dict[str, Any]:
    """Sentinel and cluster mode: check the credentials (str or None) and the
    certificate files (readable, as with a redis:// URL); the ssl options."""
    for name, value in credentials.items():
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{name} must be a str, not {type(value).__name__}")
    return {"ssl": True, **tls_options("rediss://", *tls_files)} if tls else tls_options("redis://", *tls_files)


def auth(username: Optional[str], password: Optional[str]) -> Dict[str, Any]:
    """redis-py's AUTH options: none without a password."""
    return {"username": username, "password": password} if password else {}


def set_credentials(
    connection_kwargs: MutableMapping[str, Any], username: Optional[str], password: Optional[str]
) -> None:
    """Let ``username`` / ``password``, when given, override the URL's (a user
    name without a password is not sent: AUTH needs one)."""
    for name, value in (("username", username), ("password", password)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{name} must be a str, not {type(value).__name__}")
        if value:
            connection_kwargs[name] = value
    if not connection_kwargs.get("password"):
        connection_kwargs.pop("username", None)


def url_secret(url: str) -> Optional[str]:
    """The password in a Redis URL, if any, so messages can hide it."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def describe(connection_kwargs: Mapping[str, Any]) -> Tuple[str, List[str]]:
    """``(where, secrets)`` of a client: ``host:port`` (or the socket path) and its password."""
    path = connection_kwargs.get("path")
    if path:
        where = f"unix:{path}"
    else:
        where = f"{connection_kwargs.get('host', '127.0.0.1')}:{connection_kwargs.get('port', 6379)}"
    password = connection_kwargs.get("password")
    secrets = [password] if isinstance(password, str) and password else []
    return where, secrets


def check_binary(connection_kwargs: Mapping[str, Any]) -> None:
    """Refuse a client that decodes replies: bodies are bytes, not text."""
    if connection_kwargs.get("decode_responses"):
        raise InvalidArgument("the Redis client must be created with decode_responses=False (bodies are bytes)")
