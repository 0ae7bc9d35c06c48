"""Where a streaming query's console output goes (pure).

A query writing to the console sink (`writeStream.format("console")`) prints its batches
in the process that runs it: in classic mode that is the job's own driver, whose output
is the job's log; in connect mode it is the peer's shared Spark Connect server, whose
output (all jobs' together) goes to the peer's `spark-connect.log` and cannot be told
apart per job. So the job's log says so once per query, when its listener first sees the
query's progress (jm/runtime/progress.py), naming that file.

The job process learns the file's path from its RunParams (`spark_log`, set by
`attempt_params` for the peer's embedded server), handed to it in the environment as
SPARK_LOG_ENV by the zygote.
"""
from __future__ import annotations

from typing import Optional

SPARK_CONNECT_LOG = "spark-connect.log"  # in the peer's log dir (jm/runtime/sparkserver.py)
SPARK_LOG_ENV = "JM_SPARK_CONNECT_LOG"   # the job process's copy of RunParams.spark_log
CONSOLE_SINKS = ("ConsoleTable", "ConsoleSink")  # in a progress's sink description


def writes_to_console(sink_description: Optional[str]) -> bool:
    """Whether a StreamingQueryProgress's `sink.description` is Spark's console sink
    (e.g. `org.apache.spark.sql.execution.streaming.ConsoleTable$@1f2e3d`)."""
    text = sink_description or ""
    return any(name in text for name in CONSOLE_SINKS)


def console_note(query: str, sink_description: Optional[str], connect: bool,
                 spark_log: Optional[str]) -> Optional[str]:
    """The line for the job's log about a query's console output (None: nothing to say,
    the output is in the job's log already, or the sink is not the console)."""
    if not connect or not writes_to_console(sink_description):
        return None
    where = (f"the peer's Spark Connect log, {spark_log}" if spark_log
             else "the log of the Spark Connect server (spark.remote)")
    return (f"[jm] query {query} writes to the console sink: in connect mode that output "
            f"is in {where}, not in this job's log")
