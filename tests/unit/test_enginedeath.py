"""Unit tests of jm/policy/spark/enginedeath.py and jm/cluster/jobs/jobengine.py: what an
engine's death says, whose work ran it out of memory (a statement, a streaming query's
micro-batch), and when a job that keeps doing it is failed (pure, from log text as Spark
4.3 writes it)."""
from __future__ import annotations

import json

from jm.cluster.jobs.jobengine import JobEngine
from jm.cluster.jobs.savepoint import checkpoint_query_ids
from jm.policy.spark.enginedeath import (RUN_MARK, OomSuspects, engine_death, engine_killer,
                                         oom_suspects, run_mark)
from jm.policy.spark.engines import EngineKey, ShareLevel

T = ShareLevel.TENANT

LOG = """\
26/11/28 18:35:48 INFO SparkConnectExecutionManager: ExecuteHolder ExecuteKey(,s-pipe,op-1) is created.
26/11/28 18:35:48 INFO SparkConnectExecutionManager: ExecuteHolder ExecuteKey(,s-pipe,op-1) is removed.
26/11/28 18:35:49 INFO SparkConnectExecutionManager: ExecuteHolder ExecuteKey(,s-oom,op-2) is created.
26/11/28 18:35:49 INFO SparkConnectExecutionManager: ExecuteHolder ExecuteKey(,s-pipe,op-9) is created.
26/11/28 18:35:49 INFO SparkConnectStreamingQueryListenerHandler: [SessionId: s-pipe][UserId: ][operationId: op-9] Server side listener added.
26/11/28 18:35:50 INFO SparkConnectExecutionManager: ExecuteHolder ExecuteKey(alice,s-other,op-3) is created.
26/11/28 18:35:51 INFO SparkConnectExecutionManager: ExecuteHolder ExecuteKey(alice,s-other,op-3) is removed.
26/11/28 18:35:52 INFO SparkConnectExecutionManager: ExecuteHolder ExecuteKey(,s-quick,op-4) is created.
26/11/28 18:35:52 INFO ExecuteGrpcResponseSender: Stream finished for opId=op-4, sent all responses up to last index 2. totalTime=0.6 ms
26/11/28 18:36:03 ERROR SparkUncaughtExceptionHandler: Uncaught exception in thread Thread[Executor task launch worker for task 0.0 in stage 0.0 (TID 0),5,main]
java.lang.OutOfMemoryError: Java heap space
26/11/28 18:36:03 INFO SparkConnectExecutionManager: ExecuteHolder ExecuteKey(,s-oom,op-2) is removed.
"""

Q_HOG, Q_OK = "d12f3694-8fbe-4621-8f7d-5ad5ef07680e", "347bbffc-5c81-49e1-b896-707ab51a2e40"
# a micro-batch of query d12f3... runs the engine out of memory while 347bb... runs its own
STREAM_LOG = f"""\
26/12/01 13:35:19 INFO SparkConnectStreamingQueryCache: Adding new query to the cache. Query Id {Q_HOG}, value [session id: s-hog, query id: {Q_HOG}].
26/12/01 13:35:21 INFO TaskSetManager: [queryId = 347bb] [batchId = 11] Starting task 0.0 in stage 12.0 (TID 22) (192.0.2.2,executor driver, partition 0, PROCESS_LOCAL, 9930 bytes)
26/12/01 13:35:22 INFO TaskSetManager: [queryId = d12f3] [batchId = 1] Starting task 0.0 in stage 14.0 (TID 24) (192.0.2.2,executor driver, partition 0, PROCESS_LOCAL, 9930 bytes)
26/12/01 13:35:22 INFO TaskSetManager: [queryId = d12f3] [batchId = 1] Starting task 1.0 in stage 14.0 (TID 25) (192.0.2.2,executor driver, partition 1, PROCESS_LOCAL, 9930 bytes)
26/12/01 13:35:23 INFO TaskSetManager: [queryId = 347bb] [batchId = 12] Starting task 0.0 in stage 16.0 (TID 26) (192.0.2.2,executor driver, partition 0, PROCESS_LOCAL, 9930 bytes)
26/12/01 13:35:24 ERROR Executor: Exception in task 1.0 in stage 14.0 (TID 25)
java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.util.Arrays.copyOf(Arrays.java:3541)
26/12/01 13:35:24 ERROR SparkUncaughtExceptionHandler: Uncaught exception in thread Thread[Executor task launch worker for task 1.0 in stage 14.0 (TID 25),5,main]
java.lang.OutOfMemoryError: Java heap space
26/12/01 13:35:25 WARN TaskSetManager: [queryId = d12f3] [batchId = 1] Lost task 1.0 in stage 14.0 (TID 25) (192.0.2.2 executor driver): java.lang.OutOfMemoryError: Java heap space
26/12/01 13:35:26 ERROR MicroBatchExecution: Query [id = {Q_OK}, runId = e6a79821-a139-49cd-b5e5-6c33e9967082] terminated with error
org.apache.spark.SparkException: Job 14 cancelled because SparkContext was shut down
"""


def test_the_statements_running_at_the_out_of_memory_error_are_the_suspects():
    # (s-quick's results were sent; s-pipe's listener waits for events, running nothing)
    assert oom_suspects(LOG) == OomSuspects(frozenset({"s-oom"}))
    assert not oom_suspects(LOG.replace("java.lang.OutOfMemoryError", "java.lang.Error"))
    assert not oom_suspects("")
    # killed by the kernel: no OutOfMemoryError in its log, what ran at its end is named
    assert oom_suspects(LOG.split("java.lang")[0], at_end=True).sessions == {"s-oom"}


def test_the_query_whose_micro_batch_task_ran_out_of_memory_is_the_suspect():
    suspects = oom_suspects(STREAM_LOG)
    assert suspects == OomSuspects(frozenset(), frozenset({("d12f3", 1)}))
    assert suspects.blame("s-hog-2", [Q_OK, Q_HOG]) == (
        f"this job's streaming query {Q_HOG} ran it out of memory in micro-batch 1")
    assert suspects.blame("s-ok", [Q_OK]) is None  # its batch ran too: not what failed
    assert suspects.blame(None, []) is None
    # a streaming job's session always has a call under way (awaitTermination): it is
    # named by its queries, never as a statement
    both = OomSuspects(frozenset({"s-hog", "s-ok"}), suspects.queries)
    assert both.blame("s-ok", [Q_OK]) is None
    assert "streaming query" in both.blame("s-hog", [Q_HOG])
    assert "statement was running" in both.blame("s-ok", [])
    # only the executor's word names a task: the OutOfMemoryError on the next line
    assert oom_suspects(STREAM_LOG.replace("(TID 25)\njava", "(TID 25)\nother")) == \
        OomSuspects(frozenset(), frozenset({("d12f3", 1)}))  # (its lost task says so too)
    no_loss = "\n".join(ln for ln in STREAM_LOG.splitlines() if "Lost task" not in ln)
    assert oom_suspects(no_loss).queries == {("d12f3", 1)}
    assert not oom_suspects(no_loss.replace("OutOfMemoryError", "Error"))
    assert "micro-batch 1 of query d12f3..." in suspects.describe()


def test_only_the_engine_s_last_jvm_is_read():
    """An engine's log holds every JVM it ran: an old OutOfMemoryError blames nobody now,
    and the last run's error is the one an engine's death names; a job's failure is read
    in the part of the JVM its attempt ran in, whatever started since."""
    old = run_mark(1, "a") + STREAM_LOG + run_mark(2, "b")
    assert not oom_suspects(old)
    assert oom_suspects(old + LOG).sessions == {"s-oom"}
    assert oom_suspects(LOG + run_mark(3, "c") + STREAM_LOG).queries == {("d12f3", 1)}
    assert "(exit code 52: out of memory)" in engine_death("peer", 52, LOG + run_mark(3, "c"))
    assert oom_suspects(old, generation=1).queries == {("d12f3", 1)}
    assert not oom_suspects(old + LOG, generation=2).queries
    assert oom_suspects(old + LOG, generation=2).sessions == {"s-oom"}
    # its mark before the part read: the lines before the first mark are its JVM's
    assert oom_suspects(STREAM_LOG + run_mark(8, "d") + LOG, generation=7).queries == \
        {("d12f3", 1)}
    assert RUN_MARK in run_mark(4, "e") and run_mark(4, "e").endswith("\n")


def test_an_engine_s_death_says_why_in_one_line():
    why = engine_death("tenant-a", 52, LOG)
    assert why.startswith("EngineLost: the Spark engine tenant-a that ran this job died "
                          "(exit code 52: java.lang.OutOfMemoryError: Java heap space)")
    assert "\n" not in why
    assert "(exit code 52: out of memory)" in engine_death("peer", 52, "")
    assert "(killed by signal 9)" in engine_death("peer", -9, "")
    assert "could not start: UserNotFound: x" in engine_death("tenant-a", None, "UserNotFound: x")
    assert "over its tenant's engine memory of 512 MB" in engine_death("tenant-a", -9, "",
                                                                       512 << 20)


class _Engines:
    def release(self, key, holder):
        self.released = (key, holder)


def test_a_job_that_keeps_running_its_engine_out_of_memory_is_hopeless_its_neighbours_not():
    assert engine_killer(0) is None and engine_killer(1) is None
    assert "out of memory" in engine_killer(2)
    key = EngineKey(T, "a")
    culprit, neighbour = (JobEngine(_Engines(), key, h, None, 10) for h in ("j1", "j2"))
    ran = OomSuspects(frozenset({"s1"}))
    for restart in (0, 1):
        culprit.died(restart, "EngineLost: x", ran)
        neighbour.died(restart, "EngineLost: x", ran)
    first = culprit.failure(0, {"exception": "SparkException: stopped", "traceback": "t"}, "s1")
    assert "hopeless" not in first and first["exception"].endswith("ran out of memory")
    assert first["traceback"] == "SparkException: stopped\nt"
    second = culprit.failure(1, {"exception": "y"}, "s1")
    assert "hopeless" in second
    assert all("hopeless" not in neighbour.failure(r, {}, "s2") for r in (0, 1))
    assert neighbour.failure(2, {"exception": "own"}) == {"exception": "own"}  # not its engine
    culprit.died(2, "EngineLost: x", OomSuspects())  # a death it did not cause: a new count
    assert "hopeless" not in culprit.failure(2, {}, "s1") and culprit.kills == 0


def test_a_streaming_job_whose_micro_batches_keep_killing_its_engine_is_hopeless():
    """A streaming job restarts from its checkpoint and runs the same micro-batch again:
    its query, named by its checkpoint, is what the engine's death blames each time."""
    job = JobEngine(_Engines(), EngineKey(T, "a"), "j1", None, 10)
    suspects = oom_suspects(STREAM_LOG)
    for restart in (0, 1):
        job.died(restart, "EngineLost: died", suspects)
    first = job.failure(0, {"exception": "stopped"}, "s-new", lambda: {Q_HOG})
    assert first["exception"].endswith(f"streaming query {Q_HOG} ran it out of memory in "
                                       "micro-batch 1") and "hopeless" not in first
    second = job.failure(1, {"exception": "stopped"}, "s-newer", lambda: {Q_HOG})
    assert "streaming micro-batch" in second["hopeless"]


def test_a_job_that_failed_before_its_engine_died_is_named_by_the_engine_s_log(tmp_path):
    (tmp_path / "spark-connect.log").write_text(LOG)

    class Server:
        log_dir = str(tmp_path)
    job = JobEngine(None, EngineKey(T, "a"), "j1", None, 10)
    job.server = Server()
    read = {"exception": "UnknownException: Cannot call methods on a stopped SparkContext."}
    failure = job.failure(0, read, "s-oom")
    assert failure["exception"] == (
        "EngineLost: the Spark engine tenant-a that ran this job ran out of memory "
        "(java.lang.OutOfMemoryError: Java heap space); this job's statement was running "
        "when it ran out of memory"), failure
    assert failure["traceback"].startswith("UnknownException") and job.kills == 1
    assert job.failure(1, read, "s-other") == read  # another session: its own failure
    (tmp_path / "spark-connect.log").write_text(STREAM_LOG)
    failure = job.failure(2, read, "s-x", lambda: [Q_HOG])
    assert f"streaming query {Q_HOG}" in failure["exception"] and job.kills == 2


def test_a_job_s_streaming_queries_are_named_by_their_checkpoints(tmp_path):
    for rel, qid in (("q1", Q_HOG), ("nested/q2", Q_OK)):
        q = tmp_path / rel
        (q / "offsets").mkdir(parents=True)
        (q / "commits").mkdir()
        (q / "metadata").write_text(json.dumps({"id": qid}))
    (tmp_path / "broken" / "offsets").mkdir(parents=True)
    (tmp_path / "broken" / "commits").mkdir()
    (tmp_path / "broken" / "metadata").write_text("{not json")
    (tmp_path / "a" / "b" / "c" / "d" / "offsets").mkdir(parents=True)  # too deep: not looked at
    assert checkpoint_query_ids(str(tmp_path)) == {Q_HOG, Q_OK}
    assert checkpoint_query_ids(str(tmp_path / "missing")) == frozenset()
