"""JSON on the submission path through orjson (a C codec, 5-20x the standard library's
speed on a job spec), with the standard library's answers: wherever orjson would answer
differently (NaN or Infinity, integers beyond 64 bits, which it reads as floats, lone
surrogates, a byte order mark, keys that are not strings, non-ASCII text where json
escapes it) the standard library does the work. What is read is what json.loads reads;
what is written reads back as what json.dumps wrote, but a float may be spelled in
another shortest form (1e-7 for json's 1e-07, one byte less), a float NaN or infinity is
written as null (json writes NaN, which is not JSON), and an Enum that is not also a str
or an int, or a UUID, by its value (json refuses them, or calls `default`). The callers
write values read from JSON or made of str, int and float: none of these."""
from __future__ import annotations

import json
import re
from typing import Any

import orjson

_LONG_INT = re.compile(rb"\d{19}")  # orjson reads an integer beyond 64 bits as a float

# what json does not encode itself goes to json, which refuses it or calls `default` as
# it does (orjson would write dataclasses and datetimes); subclasses of str, int, float,
# dict and list orjson writes as json does, by their values
_STRICT = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def loads(raw: bytes, **json_kw: Any) -> Any:
    """json.loads(raw, **json_kw)'s value and errors."""
    if _LONG_INT.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # (json's own error, or a value json reads and orjson does not)
    return json.loads(raw, **json_kw)


def compact_size(value: Any) -> int:
    """len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()): the
    bytes of `value` as compact UTF-8 JSON (TypeError, ValueError, UnicodeEncodeError as
    json raises them)."""
    try:
        return len(orjson.dumps(value, option=_STRICT))
    except orjson.JSONEncodeError:
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)
                   .encode("utf-8"))


def dumps_ascii(value: Any, sort_keys: bool = False, default: Any = None) -> str:
    """json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, default=default)."""
    try:
        out = orjson.dumps(value, default=default,
                           option=_STRICT | (orjson.OPT_SORT_KEYS if sort_keys else 0))
        if out.isascii() and b"\x7f" not in out:  # (json escapes DEL, orjson does not)
            return out.decode("ascii")
    except orjson.JSONEncodeError:
        pass
    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, default=default)
