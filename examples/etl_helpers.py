"""Helpers for examples/etl.py: imported on the driver and, through a UDF, on executors."""


def normalize_country(value):
    if value is None or not value.strip():
        return "unknown"
    return value.strip().upper()
