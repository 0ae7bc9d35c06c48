"""Value parsers of the configuration keys (durations, sizes, numbers, choices, ...) and
ConfigError; jm/config.py declares each key (KEYS) with one of these parsers.

A parser takes the raw YAML value and returns the typed one, or raises ValueError (the
Config class turns that into a ConfigError naming the key).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional

from jm.policy.jobs import fsuri


class ConfigError(Exception):
    """A bad or missing setting; str() is one line naming the key."""


_DURATION_UNITS = {
    "ms": 0.001, "milli": 0.001, "millis": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "m": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
_MEMORY_UNITS = {
    "b": 1, "bytes": 1, "k": 1024, "kb": 1024, "kibibytes": 1024, "m": 1024 ** 2,
    "mb": 1024 ** 2, "mebibytes": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3,
    "gibibytes": 1024 ** 3,
}
_NUM_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(value: Any) -> float:
    """Flink durations: '500 ms', '1 s', '2 min'; a bare number means milliseconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like '500 ms' or '2 s'")
    if isinstance(value, (int, float)):
        if not 0 <= value < float("inf"):
            raise ValueError(f"{value!r} is not a non-negative duration")
        return float(value) / 1000.0
    m = _NUM_UNIT.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a duration (use e.g. '500 ms', '2 s', '1 min')")
    number, unit = float(m.group(1)), m.group(2).lower() or "ms"
    if unit not in _DURATION_UNITS:
        raise ValueError(f"unknown time unit {unit!r} in {value!r}")
    if number * _DURATION_UNITS[unit] == float("inf"):
        raise ValueError(f"{value!r} is not a finite duration")
    return number * _DURATION_UNITS[unit]


def parse_memory(value: Any) -> int:
    """Flink memory sizes: '100 mb', '64kb'; a bare number means bytes."""
    if isinstance(value, bool):
        raise ValueError("expected a size like '100 mb'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value!r} is not a non-negative size")
        return value
    m = _NUM_UNIT.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a size (use e.g. '100 mb')")
    unit = m.group(2).lower() or "b"
    if unit not in _MEMORY_UNITS:
        raise ValueError(f"unknown size unit {unit!r} in {value!r}")
    return int(float(m.group(1)) * _MEMORY_UNITS[unit])


def int_value(min_value: int) -> Callable[[Any], int]:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError(f"expected an integer, got {v!r}")
        try:
            n = int(v)
        except ValueError:
            raise ValueError(f"expected an integer, got {v!r}")
        if n < min_value:
            raise ValueError(f"must be at least {min_value}, got {n}")
        return n
    return parse


def float_value(min_value: float, max_value: float = float("inf")) -> Callable[[Any], float]:
    def parse(v: Any) -> float:
        if isinstance(v, bool):
            raise ValueError(f"expected a number, got {v!r}")
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number, got {v!r}")
        if x != x or x in (float("inf"), float("-inf")):  # NaN, inf
            raise ValueError(f"expected a finite number, got {v!r}")
        if x < min_value:
            raise ValueError(f"must be at least {min_value}, got {x}")
        if x > max_value:
            raise ValueError(f"must be at most {max_value}, got {x}")
        return x
    return parse


def bool_value(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "yes", "1", "on"):
        return True
    if s in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def port_range_value(v: Any) -> tuple:
    """A port (`15002`; 0: a free one) or a range of them (`15002-15010`: the first
    free one, as Flink's rest.bind-port), as (first, last)."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError(f"expected a port or a range like 15002-15010, got {v!r}")
    text = str(v).strip()
    first, sep, last = text.partition("-")
    try:
        lo, hi = int(first), int(last if sep else first)
    except ValueError:
        raise ValueError(f"expected a port or a range like 15002-15010, got {v!r}") from None
    if not (0 <= lo <= hi <= 65535) or (lo == 0 and hi != 0):
        raise ValueError(f"expected ports between 1 and 65535 (0: a free one), got {v!r}")
    return lo, hi


def str_value(v: Any) -> str:
    if v is None or isinstance(v, (dict, list)):
        raise ValueError(f"expected a text value, got {v!r}")
    return str(v)


def opt_str_value(v: Any) -> Optional[str]:
    return None if v in (None, "") else str_value(v)


def syslog_address(address: str) -> Any:
    """A syslog destination as logging's SysLogHandler takes it: `udp://host:port` ->
    (host, port); a Unix datagram socket's path (`/dev/log`) as it is. ValueError if it
    is neither. (Datagrams only: a send never waits for a syslog server.)"""
    if address.startswith("udp://"):
        host, sep, port = address[6:].rpartition(":")
        if sep and host and port.isdigit() and 0 < int(port) < 65536:
            return host.strip("[]"), int(port)
    elif address.startswith("/"):
        return address
    raise ValueError(f"{address!r} is neither udp://host:port nor a socket's path "
                     "(/dev/log)")


def role_map_value(v: Any) -> dict:
    """`rest.auth.jwt.role-map`: "claim value=role,..." (an identity provider's group or
    role names) -> {value: role}."""
    from raft.tokens import ROLES
    out: dict = {}
    for item in ("" if v is None else str_value(v)).split(","):
        if not item.strip():
            continue
        value, sep, role = item.rpartition("=")
        if not sep or not value.strip() or role.strip() not in ROLES:
            raise ValueError(f"{item.strip()!r} is not <claim value>=<{'|'.join(ROLES)}>")
        out[value.strip()] = role.strip()
    return out


def opt_duration_value(v: Any) -> Optional[float]:
    """A positive duration, or None (unset)."""
    if v in (None, ""):
        return None
    seconds = parse_duration(v)
    if seconds <= 0:
        raise ValueError(f"expected a positive duration, got {v!r}")
    return seconds


def opt_syslog_value(v: Any) -> Optional[str]:
    text = opt_str_value(v)
    if text is not None:
        syslog_address(text)
    return text


def opt_bool_value(v: Any) -> Optional[bool]:
    return None if v in (None, "") else bool_value(v)


def savepoints_dir_value(v: Any) -> Optional[str]:
    """A path (relative: to the installation) or a URI (file://, s3://, gs://, hdfs://)."""
    v = opt_str_value(v)
    if v is not None and ("://" in v or v.startswith("file:")):
        return fsuri.location(v, "the directory")
    return v


def names_value(v: Any) -> tuple:
    """A list of names: a YAML list, or one text with commas ("a, b")."""
    if v is None or v == "" or v == ():  # (the keys' defaults are tuples)
        return ()
    items = v if isinstance(v, (list, tuple)) else str(v).split(",")
    out = []
    for item in items:
        if isinstance(item, (dict, list)):
            raise ValueError(f"expected names, got {item!r}")
        if str(item).strip():
            out.append(str(item).strip())
    return tuple(out)


RESTART_TYPES = {
    "none": "none", "off": "none", "disable": "none", "no-restart": "none",
    "fixed-delay": "fixed-delay", "fixeddelay": "fixed-delay",
    "exponential-delay": "exponential-delay", "exponentialdelay": "exponential-delay",
    "failure-rate": "failure-rate", "failurerate": "failure-rate",
}


def restart_type_value(v: Any) -> str:
    s = str_value(v).strip().lower()
    if s not in RESTART_TYPES:
        raise ValueError(f"unknown restart strategy {v!r} (use none, fixed-delay, "
                         "exponential-delay or failure-rate)")
    return RESTART_TYPES[s]


def choice_value(*options: str) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        s = str_value(v).strip().lower()
        if s not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {v!r}")
        return s
    return parse


def log_level_value(v: Any) -> str:
    s = str_value(v).upper()
    if s not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError(f"expected DEBUG, INFO, WARNING or ERROR, got {v!r}")
    return s


def size_or_percent_value(v: Any) -> tuple:
    """'1 gb' (a size) or '5%' (of the file system): (bytes, percent), one of them 0."""
    text = str(v).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise ValueError(f"{v!r} is not a percentage like '5%'")
        if not 0 <= pct <= 100:
            raise ValueError(f"{v!r} is not a percentage between 0% and 100%")
        return (0, pct)
    return (parse_memory(v), 0.0)


def log_cap_value(v: Any) -> int:
    """A log size cap: 0 (none) or at least 16 kb (a cut keeps a quarter and a half)."""
    n = parse_memory(v)
    if 0 < n < 16 * 1024:
        raise ValueError(f"{v!r} is too small: use 0 (no cap) or at least 16 kb")
    return n
