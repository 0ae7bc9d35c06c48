"""jm/fastjson.py answers as the standard library's json, for any JSON value and for the
inputs where orjson alone would not (long integers, NaN, lone surrogates, a BOM)."""
import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from jm import fastjson

scalars = (st.none() | st.booleans() | st.integers(min_value=-10 ** 30, max_value=10 ** 30)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text())
values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4)
                      | st.dictionaries(st.text(), kids, max_size=4), max_leaves=20)


def exponent_floats(value) -> bool:
    """Whether `value` holds a float that json writes with an exponent."""
    if isinstance(value, float):
        return "e" in repr(value)
    if isinstance(value, dict):
        return any(exponent_floats(v) for v in value.values())
    return isinstance(value, list) and any(exponent_floats(v) for v in value)


def not_json(name):
    raise ValueError(f"{name} is not a JSON value")


@settings(max_examples=300, deadline=None)
@given(values, st.booleans())
def test_reads_what_json_reads(value, ascii_only):
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    try:
        want = json.loads(raw)
    except ValueError:  # (a lone surrogate written raw: not UTF-8)
        with pytest.raises(ValueError):
            fastjson.loads(raw)
        return
    got = fastjson.loads(raw)
    assert got == want and json.dumps(got) == json.dumps(want)  # (types too: 1 vs 1.0)


@settings(max_examples=300, deadline=None)
@given(values)
def test_writes_what_reads_back_as_json_wrote(value):
    compact = json.dumps(value, separators=(",", ":"), sort_keys=True)
    out = fastjson.dumps_ascii(value, sort_keys=True)
    assert out.isascii()
    assert json.loads(out) == json.loads(compact)
    floats = exponent_floats(value)  # (json's 1e-07 may be written 1e-7)
    assert out == compact or floats
    try:
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)
                   .encode("utf-8"))
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            fastjson.compact_size(value)
        return
    assert fastjson.compact_size(value) == size or floats


def test_the_inputs_orjson_reads_differently():
    assert fastjson.loads(b'{"n": 123456789012345678901234567890}') == \
        {"n": 123456789012345678901234567890}  # (orjson: a float)
    assert fastjson.loads(b'{"n": 18446744073709551615}') == {"n": 2 ** 64 - 1}
    assert fastjson.loads(b'"\\udcff"') == "\udcff"  # (orjson: an error)
    assert fastjson.loads(b"\xef\xbb\xbf[1]") == [1]  # (a BOM: orjson refuses it)
    assert math.isinf(fastjson.loads(b"1e400"))
    with pytest.raises(ValueError, match="NaN is not a JSON value"):
        fastjson.loads(b'{"x": NaN}', parse_constant=not_json)
    with pytest.raises(ValueError):
        fastjson.loads(b'{"x": ')


def test_what_json_refuses_to_write_is_refused():
    with pytest.raises(UnicodeEncodeError):
        fastjson.compact_size({"s": "\udcff"})
    with pytest.raises(TypeError):
        fastjson.compact_size({"s": {1, 2}})
    with pytest.raises(TypeError):
        fastjson.compact_size({"when": __import__("datetime").datetime(2026, 1, 1)})
    assert fastjson.dumps_ascii({1: "a", "é": object()}, default=lambda o: "obj") == \
        json.dumps({1: "a", "é": object()}, separators=(",", ":"), default=lambda o: "obj")


def test_subclasses_and_defaults_are_written_as_json_writes_them():
    import dataclasses
    import datetime
    import enum

    class Role(str, enum.Enum):
        ADMIN = "admin"

    class Code(enum.IntEnum):
        OK = 200

    class Name(str):
        def __str__(self):
            return "not what json writes"

    @dataclasses.dataclass
    class Point:
        x: int

    value = {"role": Role.ADMIN, "status": Code.OK, "at": datetime.datetime(2026, 1, 1),
             "p": Point(1), "f": 1.5, "name": Name("ann")}
    assert fastjson.dumps_ascii(value, sort_keys=True, default=str) == \
        json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    assert fastjson.compact_size({"role": Role.ADMIN, "status": Code.OK}) == \
        len(json.dumps({"role": Role.ADMIN, "status": Code.OK}, separators=(",", ":")))
