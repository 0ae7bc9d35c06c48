"""The pure parts of a Livy `pyspark` session's process: the connect-command marker of a
temporary view (jm/policy/sql/connectplan.py), the protocol's messages, and how a statement's
code runs (jm/runtime/livyexec.py: output, last expression, errors, magics, tables)."""
import dataclasses
import datetime
import decimal
import io

import pytest

from jm.policy.sql import connectplan as C
from jm.policy.sql.sqlparse import classify, temp_views
from jm.policy.sql.sqlstmt import STATE
from jm.runtime.frames import read_frame
from jm.runtime import livyexec as X
from jm.runtime import livyproto as P
from jm.policy.sql.flinksql import spark_reset


@pytest.mark.parametrize("name", ["v", "My View", "a`b", "``", "ünï"])
@pytest.mark.parametrize("data", [b"", b"\x00\xff" * 100, bytes(range(256))])
def test_connectplan_round_trip(name, data):
    s = C.encode_view(name, data)
    assert s.startswith(C.MARKER)
    assert C.decode(s) == data
    assert C.view_name(s) == name
    assert temp_views([s]) == {name.lower()}
    assert classify(s) == STATE


def test_connectplan_sql_view_is_seen():
    s = C.encode_view("v", b"...")
    assert temp_views([s]) == {"v"}
    assert temp_views([s, "DROP VIEW v"]) == set()
    assert classify(s) == STATE


def test_connectplan_other_statements_and_damage():
    assert C.decode("SELECT 1") is None
    assert C.decode("CREATE TEMPORARY VIEW v AS SELECT 1") is None
    assert C.decode(None) is None
    good = C.encode_view("v", b"abc")
    for bad in (C.MARKER, C.MARKER + "!!! */ CREATE OR REPLACE TEMPORARY VIEW `v` AS SELECT 1",
                good.replace("SELECT 1", "SELECT 2"), good + "; DROP TABLE t",
                C.MARKER + "YWJj */ CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1",
                C.MARKER + "YWJ */ CREATE OR REPLACE TEMPORARY VIEW `v` AS SELECT 1"):
        with pytest.raises(ValueError):
            C.decode(bad)
    with pytest.raises(ValueError):
        C.encode_view("", b"x")


def test_too_big_note():
    assert C.too_big_note("v", 300000) == (
        "note: temporary view v is not kept if this session moves to another peer "
        "(its plan is 300000 bytes, more than 256 KB)")
    assert C.MAX_COMMAND == 256 * 1024


def test_reset_statement():
    assert spark_reset("spark.sql.x") == "RESET spark.sql.x"
    assert spark_reset("my-key") == "RESET `my-key`"
    assert classify(spark_reset("my-key")) == STATE


def test_protocol_round_trip():
    stream = io.BytesIO(b"".join(P.CODEC.pack(m, i) for i, m in enumerate(
        [P.RunCode(3, "print(1)"), P.Interrupt(3), P.Reply(True, {"a": [1]})])))
    assert P.CODEC.unpack(read_frame(stream)) == (0, P.RunCode(3, "print(1)"))
    assert P.CODEC.unpack(read_frame(stream)) == (1, P.Interrupt(3))
    assert P.CODEC.unpack(read_frame(stream)) == (2, P.Reply(True, {"a": [1]}))
    assert read_frame(stream) is None
    with pytest.raises(TypeError):
        P.CODEC.pack({"not": "a message"}, 1)
    r = P.CodeResult("error", "x", None, None, "E", "v", ("a", "b"), ("SET a=b",))
    assert P.CodeResult.from_value(dataclasses.asdict(r) | {"traceback": ["a", "b"],
                                                            "state": ["SET a=b"],
                                                            "future": 1}) == r


def run(code, ns=None):
    return X.execute(code, {} if ns is None else ns)


def test_output_and_last_expression():
    ns = {}
    r = run("print('a')\nx = 2\nx * 21", ns)
    assert (r.status, r.text) == ("ok", "a\n42")
    assert run("x", ns).text == "2"
    assert run("None").text == ""
    assert run("").status == "ok"
    assert run("import sys\nprint('e', file=sys.stderr)\nprint('o')").text == "e\no"
    assert run("print('two\\n')").text == "two\n"   # one trailing newline dropped


def test_errors_and_traceback():
    r = run("print('before')\ndef f():\n    return 1 / 0\nf()")
    assert (r.status, r.ename, r.evalue, r.text) == (
        "error", "ZeroDivisionError", "division by zero", "before")
    text = "".join(r.traceback)
    assert text.startswith("Traceback")
    assert 'File "<stdin>", line 4, in <module>' in text and 'line 3, in f' in text
    assert "livyexec" not in text
    r = run("x = (")
    assert (r.status, r.ename) == ("error", "SyntaxError")
    assert "<stdin>" in "".join(r.traceback) and "livyexec" not in "".join(r.traceback)
    r = run("raise SystemExit(3)")
    assert (r.status, r.ename) == ("error", "SystemExit")


def test_no_spark_context():
    r = run("sc.parallelize([1])", {"sc": X.NoSparkContext()})
    assert (r.status, r.ename) == ("error", "RuntimeError")
    assert r.evalue.startswith("SparkContext is not available")


def test_magics():
    ns = {"d": {"a": (1, 2)}}
    assert run("%json d", ns).json == {"a": [1, 2]}
    assert run("y = [1]\n%json y + [2]", ns).json == [1, 2]
    r = run("%json object()")
    assert (r.status, r.ename) == ("error", "TypeError")
    r = run("%json float('nan')")
    assert (r.status, r.ename) == ("error", "ValueError")
    r = run("print(1)\n%magic x")
    assert (r.status, r.ename, r.text) == ("error", "UnknownMagic", "1")
    assert X.split_magic("a = 1\n  % 3") == ("a = 1\n  % 3", None)


def test_table_of_rows():
    r = run("%table [{'b': 1, 'a': 'x'}, {'b': None, 'a': 'y'}, {'b': 2.5 > 1, 'a': None}]")
    assert r.status == "error" and r.evalue == "table rows have different types"
    t = X.to_table([{"b": 1, "a": "x"}, {"b": None, "a": "y"}])
    assert t == {"headers": [{"name": "a", "type": "STRING_TYPE"},
                             {"name": "b", "type": "INT_TYPE"}],
                 "data": [["x", 1], ["y", None]]}
    t = X.to_table([(1, datetime.date(2024, 1, 2)), (2, None)])
    assert t["headers"] == [{"name": "0", "type": "INT_TYPE"}, {"name": "1", "type": "DATE_TYPE"}]
    assert t["data"] == [[1, "2024-01-02"], [2, None]]
    assert X.to_table([decimal.Decimal("1.5")])["data"] == [["1.5"]]
    assert X.to_table([2 ** 70])["data"] == [[str(2 ** 70)]]
    assert X.to_table({"k": [1, {"x": 2}]}) == {
        "headers": [{"name": "k", "type": "ARRAY_TYPE"}], "data": [[[1, {"x": 2}]]]}


class FakeType:
    def __init__(self, name):
        self.name = name

    def typeName(self):
        return self.name


class FakeDataFrame:
    def __init__(self, n):
        self.n = n
        self.schema = type("S", (), {"fields": [
            type("F", (), {"name": "id", "dataType": FakeType("long")})(),
            type("F", (), {"name": "s", "dataType": FakeType("string")})()]})()

    def limit(self, n):
        return FakeDataFrame(min(n, self.n))

    def collect(self):
        return [(i, str(i)) for i in range(self.n)]

    def createTempView(self, name):
        pass


def test_table_of_a_dataframe():
    t = X.to_table(FakeDataFrame(5000))
    assert t["headers"] == [{"name": "id", "type": "BIGINT_TYPE"},
                            {"name": "s", "type": "STRING_TYPE"}]
    assert len(t["data"]) == X.TABLE_ROWS and t["data"][2] == [2, "2"]


def test_a_statement_that_prints_without_end_keeps_only_the_first_characters():
    """A statement's printed output is bounded where it is captured: hundreds of
    megabytes cost its process no memory, and the rest is counted in a note."""
    ns: dict = {}
    res = X.execute("for _ in range(200):\n    print('x' * 99_999)", ns)
    assert res.status == "ok"
    head, _, note = res.text.rpartition("\n[output cut: ")
    assert len(head) == X.MAX_TEXT and set(head) <= {"x", "\n"}
    assert note == f"{200 * 100_000 - X.MAX_TEXT} more characters not kept]"
    out = X.BoundedText(10)
    assert out.write("0123456789abc") == 13 and out.write("d") == 1
    assert out.getvalue() == "0123456789" and out.dropped == 4
    assert X.execute("print('short')", ns).text == "short"  # nothing noted


def test_a_result_is_cut_to_what_the_process_sends():
    small = P.CodeResult("ok", "hi", json={"a": 1})
    assert P.bounded(small, 1000) is small
    rows = [[i, "y" * 100] for i in range(10_000)]
    cut = P.bounded(P.CodeResult("ok", "t", table={"headers": ["i", "s"], "data": rows}),
                    100_000)
    assert 0 < len(cut.table["data"]) < len(rows) and cut.table["data"] == rows[
        :len(cut.table["data"])]
    assert f"of {len(rows)} rows kept]" in cut.text and cut.text.startswith("t\n")
    big = P.bounded(P.CodeResult("ok", "", json=["z" * 1000] * 1000), 100_000)
    assert big.json is None and "%json value not kept" in big.text
    huge = P.bounded(P.CodeResult("error", "", ename="E", evalue="v" * 500_000,
                                  traceback=tuple(f"line {i}" for i in range(100_000))),
                     100_000)
    assert len(huge.evalue) == 4096 and len(huge.traceback) == 20
    for r in (cut, big, huge):
        assert len(__import__("json").dumps(dataclasses.asdict(r))) <= 100_000
