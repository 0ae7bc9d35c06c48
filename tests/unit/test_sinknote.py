"""jm/policy/jobs/sinknote.py: the job log's one line about where a connect-mode query's
console output is."""
from jm.policy.jobs.sinknote import console_note, writes_to_console

CONSOLE = "org.apache.spark.sql.execution.streaming.ConsoleTable$@1b2c3d4e"
NOOP = "org.apache.spark.sql.execution.datasources.noop.NoopTable$@5f6a7b8c"
LOG = "/var/log/jm/h_8081/spark-connect.log"


def test_only_the_console_sink_counts():
    assert writes_to_console(CONSOLE)
    assert writes_to_console("org.apache.spark.sql.execution.streaming.ConsoleSink@1")
    for other in (NOOP, "MemorySink", "FileSink[/tmp/out]", "", None):
        assert not writes_to_console(other), other


def test_connect_mode_names_the_peers_spark_connect_log():
    note = console_note("to_console", CONSOLE, connect=True, spark_log=LOG)
    assert note == ("[jm] query to_console writes to the console sink: in connect mode that "
                    f"output is in the peer's Spark Connect log, {LOG}, not in this job's log")
    assert "\n" not in note


def test_a_remote_server_is_named_without_a_path():
    note = console_note("q", CONSOLE, connect=True, spark_log=None)
    assert "Spark Connect server (spark.remote)" in note


def test_nothing_to_say_in_classic_mode_or_for_another_sink():
    assert console_note("q", CONSOLE, connect=False, spark_log=LOG) is None  # job's own driver
    assert console_note("q", NOOP, connect=True, spark_log=LOG) is None
    assert console_note("q", None, connect=True, spark_log=LOG) is None


def test_the_listener_says_it_once_per_query(capsys):
    from jm.runtime.progress import SinkNotes
    notes = SinkNotes(connect=True, spark_log=LOG)
    for batch in range(3):
        notes.check({"id": "q-1", "name": "to_console", "batchId": batch, "sink": CONSOLE})
        notes.check({"id": "q-2", "name": "counts", "batchId": batch, "sink": NOOP})
    err = capsys.readouterr().err
    assert err.count("writes to the console sink") == 1 and "query to_console" in err
