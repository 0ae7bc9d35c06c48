"""Classic PySpark's `DataFrame.toJSON()` in a Livy session's Spark Connect session.

Notebook clients send code written for Livy's classic PySpark: Jupyter's sparkmagic runs
its `%%sql` cells in a pyspark session as
`for x in spark.sql(q).toJSON(use_unicode=True).take(2500): print(x)` (or `.sample(False,
f)` first, or `.collect()`), and the `livy` client downloads a DataFrame with
`df.toJSON().collect()`. Classic PySpark gives an RDD of JSON strings; Spark Connect a
DataFrame of rows with one `value` column, whose rows print as `Row(value='{...}')`. In
the session's process `toJSON` gives `JsonLines`: the RDD methods those clients call, over
the Connect DataFrame, each row its JSON string."""
from __future__ import annotations

from typing import Any, Iterator, Optional


class JsonLines:
    """What classic PySpark's `toJSON()` RDD answers: JSON strings, one per row."""

    def __init__(self, frame: Any) -> None:
        self._frame = frame  # a Connect DataFrame with one string column

    def collect(self) -> list:
        return [row[0] for row in self._frame.collect()]

    def take(self, num: int) -> list:
        return [row[0] for row in self._frame.take(num)]

    def first(self) -> Optional[str]:
        rows = self.take(1)
        return rows[0] if rows else None

    def count(self) -> int:
        return self._frame.count()

    def sample(self, withReplacement: bool, fraction: float,
               seed: Optional[int] = None) -> "JsonLines":
        return JsonLines(self._frame.sample(withReplacement, fraction, seed))

    def toDF(self) -> Any:  # noqa: N802 (PySpark's name)
        return self._frame

    def __iter__(self) -> Iterator[str]:
        return iter(self.collect())

    def __repr__(self) -> str:
        return "JsonLines (classic PySpark's toJSON() RDD, over Spark Connect)"


def install() -> None:
    """Connect DataFrames' `toJSON` gives JsonLines (in this process only)."""
    from pyspark.sql.connect.dataframe import DataFrame
    connect_to_json = DataFrame.toJSON
    if getattr(connect_to_json, "_jm_classic", False):
        return

    def to_json(self: Any, use_unicode: bool = True) -> JsonLines:
        return JsonLines(connect_to_json(self))  # (use_unicode: Python 2's, ignored)
    to_json._jm_classic = True  # type: ignore[attr-defined]
    to_json.__doc__ = connect_to_json.__doc__
    DataFrame.toJSON = to_json
