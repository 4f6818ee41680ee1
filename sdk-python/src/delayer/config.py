"""Reading the ``delayer.conf`` INI file the server uses.

Only what a client needs is read: ``[redis]`` host, port, database, username,
password, and ``[delayer]`` key_prefix. Other keys are the server's business
and are ignored here. Comments start with ``;`` or ``#``, at the start of a
line or after whitespace (``port = 6379   ; comment``).
"""

from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass, field
from typing import Optional, Union

from .errors import ConfigError
from .keys import DEFAULT_PREFIX

__all__ = ["Settings", "load"]

_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Settings:
    """Connection settings and key prefix read from ``delayer.conf``.

    The password is left out of ``repr``.
    """

    host: str = "127.0.0.1"
    port: int = 6379
    database: int = 0
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)
    key_prefix: str = DEFAULT_PREFIX


def _integer(path: str, section: str, key: str, raw: str, low: int, high: int) -> int:
    text = raw.strip()
    if not _DIGITS.fullmatch(text) or not low <= int(text) <= high:
        raise ConfigError(f"{path}: [{section}] {key}: expected an integer from {low} to {high}, got {text!r}")
    return int(text)


def load(path: Union[str, "os.PathLike[str]"]) -> Settings:
    """Read ``path`` and return its :class:`Settings`; raise :class:`ConfigError` if invalid.

    Missing keys (and keys left empty) take their defaults; an empty password
    or username means none.
    """
    name = os.fspath(path)
    parser = configparser.ConfigParser(
        interpolation=None,
        comment_prefixes=(";", "#"),
        inline_comment_prefixes=(";", "#"),
        default_section="\x00no default section",
        empty_lines_in_values=False,
        strict=True,
    )
    try:
        with open(name, encoding="utf-8") as f:
            parser.read_file(f, source=name)
    except OSError as e:
        raise ConfigError(f"{name}: cannot read the file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: the file is not UTF-8") from None
    # The parser's own messages quote the offending line, which could hold a
    # password: report positions only.
    except configparser.MissingSectionHeaderError as e:
        raise ConfigError(f"{name}: line {e.lineno}: a key before any [section] header") from None
    except configparser.DuplicateSectionError as e:
        raise ConfigError(f"{name}: line {e.lineno}: section [{e.section}] appears twice") from None
    except configparser.DuplicateOptionError as e:
        raise ConfigError(f"{name}: line {e.lineno}: [{e.section}] {e.option} appears twice") from None
    except configparser.ParsingError as e:
        lines = ", ".join(str(lineno) for lineno, _ in e.errors)
        raise ConfigError(f"{name}: cannot parse line(s) {lines}") from None
    except configparser.Error as e:
        raise ConfigError(f"{name}: invalid INI file ({type(e).__name__})") from None

    def get(section: str, key: str) -> Optional[str]:
        if not parser.has_section(section):
            return None
        value = parser.get(section, key, fallback=None)
        if value is None:
            return None
        value = value.strip()
        return value or None

    defaults = Settings()
    host = get("redis", "host") or defaults.host
    port_raw = get("redis", "port")
    port = defaults.port if port_raw is None else _integer(name, "redis", "port", port_raw, 1, 65535)
    db_raw = get("redis", "database")
    database = defaults.database if db_raw is None else _integer(name, "redis", "database", db_raw, 0, 2**31 - 1)
    return Settings(
        host=host,
        port=port,
        database=database,
        username=get("redis", "username"),
        password=get("redis", "password"),
        key_prefix=get("delayer", "key_prefix") or defaults.key_prefix,
    )
