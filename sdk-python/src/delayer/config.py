"""Reading the ``delayer.conf`` INI file the server uses, with the
``DELAYER_*`` environment variables over it.

A client reads only ``[redis]`` (the connection) and ``[delayer]``
key_prefix and layout, but refuses what the server refuses (an unknown
section or key, with the server's "did you mean" hint), so that one file
cannot mean one thing to the server and another to an application. The
rules, messages and their order are PROTOCOL.md's ("delayer.conf, as every
SDK reads it") and the Rust reader's (sdk-rust/src/conf); every error names
the file, line, section and key (or the variable), never a password.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit

from . import _sentinel
from .errors import ConfigError
from .keys import CLASSIC, DEFAULT_PREFIX, LAYOUTS, TOPIC

__all__ = ["Settings", "load", "URL_SCHEMES", "KNOWN_KEYS", "IGNORED_1X"]

#: The schemes a ``url`` may have (``redis+unix`` is another name for ``unix``).
URL_SCHEMES = ("redis", "rediss", "unix", "redis+unix")

#: Every key a ``delayer.conf`` may hold, per section, in the server's order (sdk-rust/src/conf/rules.rs).
KNOWN_KEYS: Dict[str, Tuple[str, ...]] = {
    "delayer": ("pid", "timer_interval", "access_log", "error_log", "batch_size", "key_prefix", "layout", "log_level",
                "log_format", "metrics_addr", "http_addr", "http_token", "http_read_token", "http_allow_remote",
                "http_allowed_hosts", "http_trusted_proxies", "http_session_secret", "http_session_lifetime",
                "http_max_connections", "http_header_timeout", "http_body_timeout", "http_redis_timeout",
                "http_max_waiting", "metrics_allow_remote"),
    "redis": ("url", "host", "port", "database", "username", "password", "tls_ca_file", "tls_cert_file", "tls_key_file",
              "max_idle", "max_active", "idle_timeout", "conn_max_lifetime",
              "mode", "nodes", "master_name", "sentinel_username", "sentinel_password", "tls", "require_noeviction"),
}

#: The keys of a ``[webhook.<topic>]`` section (``delayer webhook``'s), accepted by every reader.
WEBHOOK_KEYS: Tuple[str, ...] = ("url", "secret", "secret_file", "timeout", "concurrency", "ttr")

#: Delayer 1.x sections (key None) and keys this version does not use -> why: accepted, with a warning.
IGNORED_1X: Dict[Tuple[str, Optional[str]], str] = {
    ("delayerd", None): "Delayer 1.x's early section, not used; [delayer] sets the server (interval is timer_interval)",
    ("redis", "timeout"): "Delayer 1.x's command timeout, not used",
}

_log = logging.getLogger("delayer")

_DIGITS = re.compile(r"[0-9]+")
_INLINE_COMMENT = re.compile(r"\s[;#].*$", re.S)
_AFTER_QUOTE = re.compile(r"(\s*|\s+[;#].*)", re.S)


@dataclass(frozen=True)
class Settings:
    """Connection settings and key prefix read from ``delayer.conf``
    (``url`` and passwords are left out of ``repr``; ``tls_*`` are absolute
    paths of files that were readable when it was read)."""

    host: str = "127.0.0.1"
    port: int = 6379
    database: int = 0
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)
    key_prefix: str = DEFAULT_PREFIX
    url: Optional[str] = field(default=None, repr=False)
    tls_ca_file: Optional[str] = None
    tls_cert_file: Optional[str] = None
    tls_key_file: Optional[str] = None
    #: ``mode = sentinel``: the sentinels (empty in the other modes) and the master's name.
    sentinels: Tuple[Tuple[str, int], ...] = ()
    master_name: Optional[str] = None
    sentinel_username: Optional[str] = None
    sentinel_password: Optional[str] = field(default=None, repr=False)
    #: TLS to the sentinels and the master (sentinel mode), or to every node (cluster mode).
    tls: bool = False
    #: ``mode = cluster``: the seed nodes (empty in the other modes).
    cluster: Tuple[Tuple[str, int], ...] = ()
    #: ``[delayer] layout``: ``"classic"`` (the default) or ``"topic"``.
    layout: str = CLASSIC


def _value(raw: str) -> str:
    """A value as written after ``=``: unquoted, or without its inline comment."""
    value = raw.strip()
    if len(value) > 1 and value[0] in "\"'":
        close = value.find(value[0], 1)
        if close != -1 and _AFTER_QUOTE.fullmatch(value[close + 1 :]):
            return value[1:close]
    # " " first, so that a value that is only a comment ("= ; none") is empty
    return _INLINE_COMMENT.sub("", " " + value).strip()


_Entries = Dict[Tuple[str, str], Tuple[str, int]]


def _parse(name: str, text: str) -> Tuple[_Entries, Dict[str, int]]:
    """``{(section, key): (value, line)}`` in file order, and each section's
    line; messages give positions only (a line could hold a password)."""
    entries: _Entries = {}
    sections: Dict[str, int] = {}
    section: Optional[str] = None
    for n, line in enumerate(text.splitlines(), start=1):
        t = line.strip()
        if not t or t[0] in ";#":
            continue
        if t[0] == "[":
            header = _INLINE_COMMENT.sub("", t).strip()
            if not header.endswith("]"):
                raise ConfigError(f"{name}:{n}: a section header must end with ']'")
            section = header[1:-1].strip()
            if section in sections:
                raise ConfigError(f"{name}:{n}: section [{section}] appears twice")
            sections[section] = n
            continue
        eq = min((i for i in (t.find("="), t.find(":")) if i >= 0), default=-1)
        if eq <= 0:
            raise ConfigError(f"{name}:{n}: not a 'key = value' line")
        key = t[:eq].strip()
        if section is None:
            raise ConfigError(f"{name}:{n}: {key}: keys must be inside a [delayer] or [redis] section")
        if (section, key) in entries:
            raise ConfigError(f"{name}:{n}: [{section}] {key} appears twice")
        entries[(section, key)] = (_value(t[eq + 1 :]), n)
    return entries, sections


def _edit_distance(a: bytes, b: bytes) -> int:
    """Levenshtein distance: insertions, deletions and substitutions, each 1."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a):
        diagonal, row[0] = row[0], i + 1
        for j, cb in enumerate(b):
            diagonal, row[j + 1] = row[j + 1], min(diagonal + (ca != cb), row[j] + 1, row[j + 1] + 1)
    return row[len(b)]


def _closest(name: str, candidates: Tuple[str, ...]) -> Optional[str]:
    """The candidate nearest to ``name`` within 2 edits, or a third of its
    length in bytes (the server's rule); ties go to the first."""
    raw = name.encode("utf-8", "surrogateescape")
    limit = max(2, len(raw) // 3)
    best: Optional[Tuple[int, str]] = None
    for candidate in candidates:
        d = _edit_distance(raw, candidate.encode("utf-8"))
        if d <= limit and (best is None or d < best[0]):
            best = (d, candidate)
    return best[1] if best else None


def _reject_unknown(name: str, entries: _Entries, sections: Dict[str, int]) -> None:
    """The first key, in file order, of an unknown section or unknown to its
    section is an error; a 1.x key this version does not use is logged."""
    for (section, key), (_, line) in entries.items():
        note = IGNORED_1X.get((section, None)) or IGNORED_1X.get((section, key))
        if note is not None:
            _log.warning("%s:%d: [%s] %s: ignored: %s", name, line, section, key, note)
            continue
        known = KNOWN_KEYS.get(section)
        if known is None and section.startswith("webhook.") and section != "webhook.":
            known = WEBHOOK_KEYS
        if known is None:
            near = _closest(section, tuple(KNOWN_KEYS))
            hint = f" (did you mean [{near}]?)" if near else ""
            raise ConfigError(f"{name}:{sections[section]}: [{section}]: unknown section{hint}; "
                              "known sections are [delayer] and [redis]")
        if key not in known:
            near = _closest(key, known)
            hint = f" (did you mean {near}?)" if near else ""
            raise ConfigError(
                f"{name}:{line}: [{section}] {key}: unknown key{hint}; [{section}] takes {', '.join(known)}"
            )


#: Keys naming one fixed address, which neither sentinel nor cluster mode has.
FIXED_ONLY = ("url", "host", "port")
#: Why the classic layout cannot run on a cluster.
NEEDS_TOPIC = "mode = cluster needs [delayer] layout = topic (the classic layout keeps every job in one key)"


def _mode(get: Callable[[str], Optional[str]], err: Callable[[str, str], ConfigError],
          layout: str) -> Tuple[bool, List[Tuple[str, int]]]:
    """``[redis] mode`` and its keys: whether it is cluster mode, and the
    sentinels or seed nodes (none in standalone mode). The server's rule and
    order (sdk-rust/src/sentinel.rs, cluster.rs), so that a file with several
    mistakes gets the same first error."""
    mode = get("mode")
    if mode is None or mode == "standalone":
        for key in ("nodes", "master_name", "sentinel_username", "sentinel_password", "tls"):
            if get(key) is not None:
                modes = "sentinel or cluster" if key in ("nodes", "tls") else "sentinel"
                raise err(key, f"is only used with mode = {modes} (mode is standalone)")
        return False, []
    if mode not in ("sentinel", "cluster"):
        raise err("mode", f"{_rust_quoted(mode)} is not a mode: standalone, sentinel or cluster")
    cluster = mode == "cluster"
    if cluster:
        for key in (*FIXED_ONLY, "master_name", "sentinel_username", "sentinel_password"):
            if get(key) is not None:
                raise err(key, "not used with mode = cluster: the nodes name the cluster")
        if get("database") not in (None, "0"):
            raise err("database", "Redis Cluster has only database 0")
    else:
        for key in FIXED_ONLY:
            if get(key) is not None:
                raise err(key, "not used with mode = sentinel: the sentinels name the master (nodes)")
    nodes = get("nodes")
    if nodes is None:
        what = "seed nodes" if cluster else "the sentinels"
        raise err("mode", f"mode = {mode} needs nodes ({what}: host:port,host:port,...)")
    if not cluster and get("master_name") is None:
        raise err("mode", "mode = sentinel needs master_name")
    tls = get("tls")
    if tls not in (None, "yes", "no", "true", "false"):
        raise err("tls", f"{_rust_quoted(tls or '')} is not yes or no")
    try:
        parsed = _sentinel.parse_nodes(nodes)
    except ValueError as bad:
        raise err("nodes", f"{_rust_quoted(str(bad))} is not host:port") from None
    if cluster and layout != TOPIC:
        raise err("mode", NEEDS_TOPIC)
    return cluster, parsed


def _rust_quoted(text: str) -> str:
    """``text`` in double quotes, as Rust's ``{:?}`` shows a plain string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: Largest value a ``DELAYER_*_FILE`` variable's file may hold (sdk-rust/src/conf/env.rs).
MAX_ENV_FILE_BYTES = 64 * 1024


def env_var(section: str, key: str) -> str:
    """The variable that sets ``key`` of ``[section]``: ``DELAYER_HTTP_ADDR``, ``DELAYER_REDIS_PASSWORD``."""
    return f"DELAYER_{key.upper()}" if section == "delayer" else f"DELAYER_{section.upper()}_{key.upper()}"


def _overlay(entries: _Entries, environ: Mapping[str, str]) -> Dict[Tuple[str, str], str]:
    """Lay the ``DELAYER_*`` variables (``_FILE``: read from that file) over
    ``entries``; return the variable each key set was taken from."""
    sources: Dict[Tuple[str, str], str] = {}
    for section, keys in KNOWN_KEYS.items():
        for key in keys:
            var = env_var(section, key)
            file_var = var + "_FILE"
            if var in environ and file_var in environ:
                raise ConfigError(f"{file_var}: [{section}] {key}: {var} is set too; set one of them, not both")
            if var in environ:
                entries[(section, key)] = (environ[var], 0)
                sources[(section, key)] = var
            elif file_var in environ:
                entries[(section, key)] = (_read_value(environ[file_var], f"{file_var}: [{section}] {key}: "), 0)
                sources[(section, key)] = file_var
    # The address's two forms: the environment's replaces the file's other one.
    for given, other in ((("url",), ("host", "port", "database")), (("host", "port", "database"), ("url",))):
        if any(("redis", k) in sources for k in given):
            for k in other:
                if ("redis", k) not in sources:
                    entries.pop(("redis", k), None)
    return sources


def _read_value(path: str, where: str) -> str:
    """The file's text, trailing newlines dropped (errors never show the contents)."""
    if not path:
        raise ConfigError(f"{where}is empty: it names the file to read the value from")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_ENV_FILE_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{where}cannot read {path}: {e.strerror or e}") from None
    if len(data) > MAX_ENV_FILE_BYTES:
        raise ConfigError(f"{where}{path} is larger than {MAX_ENV_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ConfigError(f"{where}{path} is not UTF-8 text") from None


def load(path: Union[str, "os.PathLike[str]"], environ: Optional[Mapping[str, str]] = None) -> Settings:
    """Read ``path``, with the ``DELAYER_*`` variables of ``environ`` (default:
    the process's) over it; :class:`ConfigError` if invalid. A key missing
    or left empty takes its default (an empty password: none)."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8-sig") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"{name}: cannot read the file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: the file is not UTF-8") from None
    entries, sections = _parse(name, text)
    _reject_unknown(name, entries, sections)
    from_env = _overlay(entries, os.environ if environ is None else environ)
    base = os.path.dirname(os.path.abspath(name))

    def get(section: str, key: str) -> Optional[str]:
        found = entries.get((section, key))
        return found[0] if found and found[0] else None

    def error(section: str, key: str, message: str) -> ConfigError:
        var = from_env.get((section, key))
        if var is not None:
            return ConfigError(f"{var}: [{section}] {key}: {message}")
        found = entries.get((section, key))
        line = f":{found[1]}" if found else ""
        return ConfigError(f"{name}{line}: [{section}] {key}: {message}")

    def integer(key: str, default: int, low: int, high: int) -> int:
        raw = get("redis", key)
        if raw is None:
            return default
        if not _DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
            raise error("redis", key, f"expected an integer from {low} to {high}, got {raw!r}")
        return int(raw)

    def readable(key: str) -> Optional[str]:
        raw = get("redis", key)
        if raw is None:
            return None
        # relative to the file's directory, or to the working directory when from the environment
        full = os.path.abspath(raw) if (("redis", key) in from_env) else os.path.join(base, raw)
        try:
            with open(full, "rb"):
                pass
        except OSError as e:
            raise error("redis", key, f"cannot read {raw}: {e.strerror or e}") from None
        return full

    # In the Rust reader's order (sdk-rust/src/conf), so that a file with several mistakes gets the same first error.
    layout = get("delayer", "layout") or CLASSIC
    if layout not in LAYOUTS:
        raise error("delayer", "layout", f'"{layout}" is not one of classic, topic')
    prefix = get("delayer", "key_prefix") or DEFAULT_PREFIX
    if layout == TOPIC and ("{" in prefix or "}" in prefix):
        # the Rust reader's message (sdk-rust/src/conf/mod.rs, layout)
        raise error("delayer", "key_prefix", f"key_prefix {json.dumps(prefix, ensure_ascii=False)} contains a brace,"
                    " which the per-topic layout cannot use")
    cluster, nodes = _mode(lambda key: get("redis", key), lambda key, message: error("redis", key, message), layout)
    url = get("redis", "url")
    if url is not None:
        for key in ("host", "port", "database"):
            if get("redis", key) is not None:
                raise error("redis", key, "set either url or host/port/database, not both")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (raises ValueError on a bad port)
            ok = parts.scheme in URL_SCHEMES
        except ValueError:
            ok = False
        if not ok:
            raise error("redis", "url", "not a redis://, rediss:// or unix:// URL")
    defaults = Settings()
    database = integer("database", defaults.database, 0, 2**31 - 1)
    cert = readable("tls_cert_file")
    key_file = readable("tls_key_file")
    if cert is not None and key_file is None:
        raise error("redis", "tls_cert_file", "needs tls_key_file too")
    if key_file is not None and cert is None:
        raise error("redis", "tls_key_file", "needs tls_cert_file too")
    port = integer("port", defaults.port, 1, 65535)
    return Settings(host=get("redis", "host") or defaults.host, port=port, database=database,
                    username=get("redis", "username"), password=get("redis", "password"), key_prefix=prefix, url=url,
                    tls_ca_file=readable("tls_ca_file"), tls_cert_file=cert, tls_key_file=key_file,
                    sentinels=() if cluster else tuple(nodes), cluster=tuple(nodes) if cluster else (),
                    master_name=get("redis", "master_name"), sentinel_username=get("redis", "sentinel_username"),
                    sentinel_password=get("redis", "sentinel_password"), tls=get("redis", "tls") in ("yes", "true"),
                    layout=layout)
