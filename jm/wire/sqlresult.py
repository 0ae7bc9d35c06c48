"""Spark result schemas in the shape of Flink's SQL Gateway (pure): a Spark schema's JSON
(`StructType.jsonValue()`) to Flink's column infos with logical types. The rest of a
fetch's answer (`resultType`, the rows, `nextResultUri`) is rest/sql.py's."""
from __future__ import annotations

import re
from typing import Any

VARCHAR_MAX = 2147483647
_SIMPLE = {"integer": "INTEGER", "long": "BIGINT", "short": "SMALLINT", "byte": "TINYINT",
           "boolean": "BOOLEAN", "double": "DOUBLE", "float": "FLOAT", "date": "DATE",
           "null": "NULL", "void": "NULL"}


def logical_type(spark_type: Any, nullable: bool = True) -> dict:
    """One Spark type (its JSON form) as a Flink logical type."""
    if isinstance(spark_type, str):
        t = spark_type.lower()
        if t in _SIMPLE:
            return {"type": _SIMPLE[t], "nullable": nullable}
        if t == "string":
            return {"type": "VARCHAR", "nullable": nullable, "length": VARCHAR_MAX}
        m = re.fullmatch(r"(var)?char\((\d+)\)", t)
        if m:
            return {"type": "VARCHAR" if m.group(1) else "CHAR", "nullable": nullable,
                    "length": int(m.group(2))}
        m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", t)
        if m:
            return {"type": "DECIMAL", "nullable": nullable, "precision": int(m.group(1)),
                    "scale": int(m.group(2))}
        if t == "decimal":
            return {"type": "DECIMAL", "nullable": nullable, "precision": 10, "scale": 0}
        if t == "timestamp":
            return {"type": "TIMESTAMP_WITH_LOCAL_TIME_ZONE", "nullable": nullable,
                    "precision": 6}
        if t == "timestamp_ntz":
            return {"type": "TIMESTAMP_WITHOUT_TIME_ZONE", "nullable": nullable,
                    "precision": 6}
        if t == "binary":
            return {"type": "VARBINARY", "nullable": nullable, "length": VARCHAR_MAX}
        if t.startswith("interval year") or t.startswith("interval month"):
            return {"type": "INTERVAL_YEAR_MONTH", "nullable": nullable}
        if t.startswith("interval"):
            return {"type": "INTERVAL_DAY_TIME", "nullable": nullable}
        return {"type": "RAW", "nullable": nullable, "sparkType": spark_type}
    if isinstance(spark_type, dict):
        kind = spark_type.get("type")
        if kind == "array":
            return {"type": "ARRAY", "nullable": nullable,
                    "elementType": logical_type(spark_type.get("elementType"),
                                                bool(spark_type.get("containsNull", True)))}
        if kind == "map":
            return {"type": "MAP", "nullable": nullable,
                    "keyType": logical_type(spark_type.get("keyType"), False),
                    "valueType": logical_type(spark_type.get("valueType"),
                                              bool(spark_type.get("valueContainsNull", True)))}
        if kind == "struct":
            return {"type": "ROW", "nullable": nullable,
                    "fields": [{"name": f.get("name"),
                                "fieldType": logical_type(f.get("type"),
                                                          bool(f.get("nullable", True)))}
                               for f in spark_type.get("fields", [])]}
        if kind == "udt":
            return logical_type(spark_type.get("sqlType"), nullable)
    return {"type": "RAW", "nullable": nullable, "sparkType": str(spark_type)}


def columns(schema_json: Any) -> list[dict]:
    """Flink column infos for a Spark schema's JSON."""
    fields = schema_json.get("fields", []) if isinstance(schema_json, dict) else []
    return [{"name": f.get("name"), "logicalType": logical_type(f.get("type"),
                                                              bool(f.get("nullable", True))),
             "comment": None} for f in fields]

