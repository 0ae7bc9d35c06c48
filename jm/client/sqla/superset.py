"""Apache Superset's engine spec for `jm://`, found by Superset through the entry point
`superset.db_engine_specs` (jm-client's and the project's pyproject.toml): the name
Superset shows, the time grains a chart's time axis offers (Spark SQL's `date_trunc`) and
date/time literals in Spark SQL's syntax for time filters. Imported only by Superset, in
its own environment (this module imports Superset's base class)."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from sqlalchemy import types
from superset.db_engine_specs.base import BaseEngineSpec

# Superset's ISO 8601 grain names -> Spark SQL (a week starts on Monday in date_trunc)
_GRAINS = {"PT1S": "SECOND", "PT1M": "MINUTE", "PT1H": "HOUR", "P1D": "DAY",
           "P1W": "WEEK", "P1M": "MONTH", "P3M": "QUARTER", "P1Y": "YEAR"}


class JmEngineSpec(BaseEngineSpec):
    engine = "jm"
    engine_name = "Spark SQL (jm cluster)"
    sqlalchemy_uri_placeholder = "jm://peer-host:8081/?peers=other-host:8081"
    _time_grain_expressions = {
        None: "{col}",
        **{grain: f"date_trunc('{unit}', {{col}})" for grain, unit in _GRAINS.items()},
    }

    @classmethod
    def epoch_to_dttm(cls) -> str:
        return "timestamp_seconds({col})"

    @classmethod
    def epoch_ms_to_dttm(cls) -> str:
        return "timestamp_millis({col})"

    @classmethod
    def convert_dttm(cls, target_type: str, dttm: datetime,
                     db_extra: Optional[dict[str, Any]] = None) -> Optional[str]:
        """A filter's bound as a Spark SQL literal of the column's type (DATE'...',
        TIMESTAMP'...'); None for other types (Superset then compares as it is)."""
        sqla_type = cls.get_sqla_column_type(target_type)
        if isinstance(sqla_type, types.Date) and not isinstance(sqla_type, types.DateTime):
            return f"DATE'{dttm.date().isoformat()}'"
        if isinstance(sqla_type, (types.DateTime, types.TIMESTAMP)):
            return f"TIMESTAMP'{dttm.isoformat(sep=' ', timespec='microseconds')}'"
        return None
