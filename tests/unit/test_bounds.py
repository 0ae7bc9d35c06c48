"""Bounded everything (issue 16, item 2): failure texts and results a job hands back,
spec sizes, restart-strategy numbers, savepoint requests, attempt records, batches and the
job-store purge. Pure parts and services with fakes; tests/integration/test_bounds.py runs
the same through real peers."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys

import pytest

from jm.config import Config, ConfigError, load_config
from jm.policy.jobs.bounds import bounded_failure, readable, storable, truncate
from jm.policy.jobs.attempt import Phase
from jm.policy.jobs.attemptio import SpawnFailed
from jm.policy.jobs.restart import RestartStrategy, validate_override
from jm.policy.jobs.retention import purge_batches
from jm.policy.jobs.runparams import RunParams
from jm.policy.jobs.spec import SpecError, SpecTooLarge, validate_spec
from raft import commands as c
from raft import state as S
from raft.commands import encode
from raft.jobspec import JobSpec
from raft.state import ClusterState, Result
from tests.unit.test_clock_use import _Raft

SURROGATE_NAME = os.fsdecode(b"data-\xff.csv")  # a file name that is not UTF-8


# ---- failure texts: readable, truncated ---------------------------------------------------

def test_a_lone_surrogate_becomes_its_readable_escape():
    text = f"cannot read {SURROGATE_NAME}"
    assert "\udcff" in text
    with pytest.raises(UnicodeEncodeError):
        text.encode("utf-8")
    out = readable(text)
    assert out == "cannot read data-\\udcff.csv"
    out.encode("utf-8")


def test_truncate_keeps_the_limit_and_says_how_much_was_cut():
    text = "x" * 5_000_000
    out = truncate(text, 16 * 1024)
    assert len(out.encode()) <= 16 * 1024
    assert out.startswith("xxx") and out.endswith("bytes]")
    cut = int(out.rsplit("[truncated, ", 1)[1].split()[0])
    assert cut == 5_000_000 - out.index("...")
    tail = truncate("é" * 10_000 + "END", 1000, "tail")
    assert len(tail.encode()) <= 1000 and tail.endswith("END") and tail.startswith("[truncated")
    assert truncate("short", 100) == "short"


def test_a_failure_of_any_size_or_text_encodes_for_raft():
    failure = {"exception": "SystemExit: " + "x" * 5_000_000 + SURROGATE_NAME,
               "traceback": "Traceback...\n" * 100_000 + SURROGATE_NAME, "final": True,
               "extra": {SURROGATE_NAME: [1, 2]}}
    with pytest.raises(Exception):
        encode(c.StatusReport("j", 1, "n", S.FAILED, 1.0, None, failure))
    out = bounded_failure(failure, 16 * 1024)
    assert len(out["exception"].encode()) <= 16 * 1024
    assert len(out["traceback"].encode()) <= 16 * 1024
    assert out["traceback"].endswith("data-\\udcff.csv")  # a traceback keeps its end
    assert out["final"] is True
    encode(c.StatusReport("j", 1, "n", S.FAILED, 1.0, None, out))
    assert bounded_failure("just text", 100) == {"exception": "just text", "traceback": ""}


def test_storable_results_have_readable_strings_and_str_keys():
    value = {SURROGATE_NAME: [SURROGATE_NAME, 1, 2.5, None, True], "k": {"n": 3}}
    out = storable(value)
    assert out == {"data-\\udcff.csv": ["data-\\udcff.csv", 1, 2.5, None, True], "k": {"n": 3}}
    encode(c.StatusReport("j", 1, "n", S.FINISHED, 1.0, out))


# ---- the job process writes bounded error.json --------------------------------------------

@contextlib.contextmanager
def _job_process_state():
    """run_job changes the process (environment, SIGTERM handler, sys.path): put it back."""
    env, handler, path = dict(os.environ), signal.getsignal(signal.SIGTERM), list(sys.path)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(env)
        signal.signal(signal.SIGTERM, handler)
        sys.path[:] = path


@pytest.mark.parametrize("message", [f"cannot read {SURROGATE_NAME}", "y" * 5_000_000])
def test_sys_exit_message_is_written_readable_and_truncated(tmp_path, message):
    from jm.runtime.jobrun import run_job
    name = f"bounds_exit_job_{len(message)}"
    mod = tmp_path / f"{name}.py"
    mod.write_text(f"import sys\nMSG = {message!r}\ndef main(ctx):\n    sys.exit(MSG)\n")
    params = RunParams(job_id="j", attempt=1, node="n", checkpoint_dir=str(tmp_path),
                       entry=f"{name}:main", pyfiles=(str(mod),),
                       log_path=str(tmp_path / "job.log"),
                       result_path=str(tmp_path / "result.json"),
                       error_path=str(tmp_path / "error.json"), max_failure_size=4096)
    with _job_process_state():
        try:
            assert run_job(params) == 1
        finally:
            sys.modules.pop(name, None)
    assert os.path.getsize(tmp_path / "error.json") < 3 * 4096
    err = json.loads((tmp_path / "error.json").read_text())
    assert err["exception"].startswith("SystemExit: ")
    assert len(err["exception"].encode()) <= 4096
    if "\udcff" in message:
        assert err["exception"] == "SystemExit: cannot read data-\\udcff.csv"
    else:
        assert "[truncated, " in err["exception"]


# ---- the JobMaster: bounded reads, a report that always lands --------------------------

class _Reporter:
    """Stands in for the peer's status Batcher: refuses what Raft could not store."""

    def __init__(self) -> None:
        self.reports = []

    async def submit(self, report):
        try:
            encode(c.ReportStatuses((report,)))
        except Exception as exc:
            return Result.fail("invalid", f"cannot be stored: {exc}")
        self.reports.append(report)
        return Result(True)


def _jobmaster(tmp_path, **conf):  # (a Spawn would need the rest of JobEnv)
    from jm.cluster.jobs.jobservices import JobEnv
    from jm.cluster.jobs.jobmaster import JobMaster
    config = Config(conf, str(tmp_path))
    env = JobEnv("n1", config, None, _Reporter(), None, lambda: None, None, str(tmp_path),
                 str(tmp_path), lambda: 1.0)
    return JobMaster(env, "j", 1, JobSpec.from_wire({"entry": "m:f"})), env.reporter


def test_a_failure_with_a_lone_surrogate_and_5_mb_reaches_failed(tmp_path):
    jm, reporter = _jobmaster(tmp_path)

    async def go():
        await jm._send(S.FAILED, failure={
            "exception": f"SystemExit: cannot read {SURROGATE_NAME} " + "z" * 5_000_000,
            "traceback": "", "final": True})
    asyncio.run(go())
    [r] = reporter.reports
    assert r.status == S.FAILED
    assert r.failure["exception"].startswith("SystemExit: cannot read data-\\udcff.csv zzz")
    assert len(r.failure["exception"].encode()) <= 16 * 1024
    assert "[truncated, " in r.failure["exception"]


def test_a_refused_final_failure_still_ends_the_job(tmp_path):
    jm, reporter = _jobmaster(tmp_path)
    calls = []

    async def picky(report):  # refuses the first FAILED (as Raft refused unencodable text)
        calls.append(report)
        if len(calls) == 1:
            return Result.fail("invalid", "cannot be stored: something")
        reporter.reports.append(report)
        return Result(True)
    reporter.submit = picky

    async def go():  # the JobMaster's loop, from an attempt that could not start
        jm.state.phase = Phase.PREPARING
        await jm._feed(SpawnFailed(0, {"exception": "x", "traceback": ""}, final=True))
        while not jm.state.done:
            await asyncio.wait_for(jm._feed(await jm.events.get()), 10)
    asyncio.run(go())
    assert [x.status for x in calls] == [S.FAILED, S.FAILED]
    [r] = reporter.reports
    assert r.status == S.FAILED and r.failure["final"] is True
    assert "could not be stored" in r.failure["exception"]


def test_result_and_error_files_are_size_checked(tmp_path):
    from jm.cluster.jobs.jobfiles import read_failure, read_result
    limit = Config({"jobmanager.result.max-size": "1 kb"}, str(tmp_path))[
        "jobmanager.result.max-size"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "result.json").write_text(json.dumps({"result": "r" * 5000}))
    (run / "error.json").write_text(json.dumps({"exception": "e" * 50_000, "traceback": ""}))

    async def go():
        return (read_result(str(run), limit), read_failure(str(run), 1, 0, limit))
    (value, problem), failure = asyncio.run(go())
    assert value is None and "jobmanager.result.max-size (1024 bytes)" in problem
    assert "error.json" in failure["exception"] and len(failure["exception"]) < 1024
    (run / "result.json").write_text(json.dumps({"result": {"ok": SURROGATE_NAME}}))
    (run / "error.json").write_text(json.dumps({"exception": "e" * 3000, "traceback": "t"}))
    (value, problem), failure = asyncio.run(go())
    assert problem is None and value == {"ok": SURROGATE_NAME}
    assert len(failure["exception"].encode()) <= 1024 and failure["traceback"] == "t"


# ---- restart-strategy numbers are finite ----------------------------------------------

@pytest.mark.parametrize("option,value", [
    ("backoff-multiplier", float("nan")), ("backoff-multiplier", "nan"),
    ("backoff-multiplier", float("inf")), ("backoff-multiplier", "inf"),
    ("backoff-multiplier", 0.5), ("backoff-multiplier", 1e9),
    ("jitter-factor", float("nan")), ("jitter-factor", 1.5),
    ("initial-backoff", float("inf")), ("max-backoff", float("nan")),
    ("attempts-before-reset-backoff", float("inf")), ("attempts-before-reset-backoff", 0),
])
def test_a_job_spec_restart_strategy_number_must_be_finite_and_sensible(option, value):
    with pytest.raises(ValueError, match=f"restart-strategy.{option}"):
        validate_override({"type": "exponential-delay", option: value})
    with pytest.raises(SpecError):
        validate_spec({"entry": "m:f", "restart-strategy": {"type": "exponential-delay",
                                                            option: value}})


def test_failure_rate_needs_at_least_one_failure_per_interval():
    with pytest.raises(ValueError, match="max-failures-per-interval"):
        validate_override({"type": "failure-rate", "max-failures-per-interval": 0})


@pytest.mark.parametrize("key,value", [
    ("restart-strategy.exponential-delay.backoff-multiplier", "nan"),
    ("restart-strategy.exponential-delay.backoff-multiplier", float("nan")),
    ("restart-strategy.exponential-delay.backoff-multiplier", ".inf"),
    ("restart-strategy.exponential-delay.backoff-multiplier", 1000),
    ("restart-strategy.exponential-delay.jitter-factor", "inf"),
    ("restart-strategy.exponential-delay.jitter-factor", 2),
    ("restart-strategy.fixed-delay.delay", float("inf")),
    ("restart-strategy.fixed-delay.delay", "9" * 400 + " s"),
])
def test_the_config_refuses_non_finite_restart_numbers(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        Config({key: value}, "/tmp")


def test_a_config_file_nan_multiplier_stops_start_up(tmp_path):
    (tmp_path / "config.yaml").write_text(
        "restart-strategy:\n  exponential-delay:\n    backoff-multiplier: .nan\n")
    with pytest.raises(ConfigError, match="backoff-multiplier"):
        load_config(str(tmp_path))


def test_sensible_restart_numbers_still_work():
    override = validate_override({"type": "exponential-delay", "backoff-multiplier": "2",
                                  "jitter-factor": 1, "initial-backoff": "250 ms"})
    s = RestartStrategy.from_config(Config({}, "/tmp"), override)
    assert s.options["backoff-multiplier"] == 2.0 and s.options["jitter-factor"] == 1.0
    assert s.options["initial-backoff"] == 0.25


# ---- spec sizes ----------------------------------------------------------------------------

def test_a_spec_over_its_limit_is_too_large_naming_the_key():
    spec = {"entry": "m:f", "spark-conf": {"spark.x": "y" * (1024 * 1024 + 1)}}
    with pytest.raises(SpecTooLarge, match="jobmanager.spec.max-size") as err:
        validate_spec(spec)
    assert err.value.status == 413


def test_args_and_sql_have_their_own_limits():
    with pytest.raises(SpecTooLarge, match="jobmanager.spec.max-args-size"):
        validate_spec({"entry": "m:f", "args": {"blob": "x" * 300_000}})
    with pytest.raises(SpecTooLarge, match="jobmanager.spec.max-sql-size"):
        validate_spec({"sql": "SELECT 1 -- " + "x" * 300_000})
    from jm.policy.jobs.spec import SpecLimits
    ok = validate_spec({"sql": "SELECT 1 -- " + "x" * 300_000},
                       limits=SpecLimits(sql=1024 * 1024))
    assert ok["sql"].startswith("SELECT 1")
    assert validate_spec({"entry": "m:f", "args": {"blob": "x" * 200_000}})["args"]


def test_a_spec_with_a_lone_surrogate_is_a_400_not_a_stuck_write():
    with pytest.raises(SpecError, match="not valid Unicode") as err:
        validate_spec({"entry": "m:f", "args": {"file": SURROGATE_NAME}})
    assert err.value.status == 400


def test_spec_limits_are_config_keys():
    from jm.policy.jobs.spec import SpecLimits
    conf = Config({"jobmanager.spec.max-size": "2 kb", "jobmanager.spec.max-args-size": "1 kb",
                   "jobmanager.spec.max-sql-size": "3 kb",
                   "jobmanager.failure.max-size": "8 kb"}, "/tmp")
    assert SpecLimits.from_conf(conf) == SpecLimits(2048, 1024, 3072)
    assert conf["jobmanager.failure.max-size"] == 8192
    defaults = Config({}, "/tmp")
    assert SpecLimits.from_conf(defaults) == SpecLimits()


# ---- savepoint requests and attempt records are capped --------------------------------

def _streaming_job(st: ClusterState) -> None:
    st.apply(c.RegisterPeer("n1", "h", 8000, 9000, 100, 4, 1.0))
    st.apply(c.SubmitJob("s", {"job-type": "streaming"}, 2.0))
    st.apply(c.AssignJobs((c.Assignment("s", "n1", 0),), 3.0))


def test_pending_savepoint_requests_are_capped():
    st = ClusterState()
    _streaming_job(st)
    results = [st.apply(c.TriggerSavepoint("s", f"t{i}", None, False, 4.0))
               for i in range(1000)]
    kept = st.jobs["s"].savepoints
    assert len(kept) == S.MAX_PENDING_SAVEPOINTS
    assert sum(r.ok for r in results) == S.MAX_PENDING_SAVEPOINTS
    refused = results[-1]
    assert not refused.ok and refused.code == "conflict" and "in progress" in refused.error
    # one completes: room for one more; completed ones are evicted past the cap
    st.apply(c.CompleteSavepoint("s", 1, "n1", "t0", "/sp/0", None, 5.0))
    assert st.apply(c.TriggerSavepoint("s", "again", None, False, 6.0)).ok
    assert len(st.jobs["s"].pending_savepoints()) == S.MAX_PENDING_SAVEPOINTS


def test_a_savepoint_target_is_bounded():
    st = ClusterState()
    _streaming_job(st)
    res = st.apply(c.TriggerSavepoint("s", "t", "/" + "d" * 10_000, False, 4.0))
    assert not res.ok and res.code == "invalid"
    assert st.jobs["s"].savepoints == {}


def test_attempt_records_keep_the_first_and_the_last_k():
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h", 8000, 9000, 100, 4, 1.0))
    st.apply(c.SubmitJob("j", {}, 2.0))
    for i in range(200):  # each restart of the peer (new pid) requeues, then it is placed
        assert st.apply(c.AssignJobs((c.Assignment("j", "n1", i),), 3.0 + i)).value[
            "assigned"]
        st.apply(c.RegisterPeer("n1", "h", 8000, 9000, 101 + i, 4, 3.5 + i))
    attempts = st.jobs["j"].attempts
    assert len(attempts) == S.MAX_ATTEMPTS_KEPT + 1
    assert attempts[0].epoch == 1
    assert [a.epoch for a in attempts[1:]] == list(range(201 - S.MAX_ATTEMPTS_KEPT, 201))


# ---- batches are bounded in bytes -------------------------------------------------------

class _BatchRaft:
    def __init__(self) -> None:
        self.sizes = []
        self.st = ClusterState()

    async def submit(self, command, timeout):
        blob = encode(command)  # (as RaftHost.submit and every replica do)
        self.sizes.append(len(blob))
        return self.st.apply(c.decode(blob))

    def protocol(self):
        return self.st.protocol


def test_a_batch_is_bounded_in_bytes_and_an_unencodable_item_fails_alone():
    from jm.cluster.batcher import MAX_BATCH_BYTES, Batcher

    async def go():
        raft = _BatchRaft()
        b = Batcher(raft, c.SubmitJobs, 5.0, retry=False)
        b.start()
        try:
            jobs = [b.submit(c.SubmitJob(f"j{i}", {"args": {"x": "y" * 300_000}}, 1.0))
                    for i in range(12)]
            bad = b.submit(c.SubmitJob("bad", {"name": SURROGATE_NAME}, 1.0))
            out = await asyncio.gather(*jobs, bad)
        finally:
            await b.close()
        return raft, out
    raft, out = asyncio.run(go())
    assert all(r.ok for r in out[:-1]) and len(raft.st.jobs) == 12
    assert not out[-1].ok and "cannot be stored" in out[-1].error
    assert len(raft.sizes) >= 4 and max(raft.sizes) <= MAX_BATCH_BYTES + 4096


def test_an_item_larger_than_a_batch_goes_alone():
    from jm.cluster.batcher import Batcher

    async def go():
        raft = _BatchRaft()
        b = Batcher(raft, c.SubmitJobs, 5.0, retry=False, max_bytes=1000)
        b.start()
        try:
            out = await asyncio.gather(
                b.submit(c.SubmitJob("big", {"args": {"x": "y" * 5000}}, 1.0)),
                b.submit(c.SubmitJob("small", {}, 1.0)))
        finally:
            await b.close()
        return raft, out
    raft, out = asyncio.run(go())
    assert all(r.ok for r in out) and len(raft.sizes) == 2


# ---- the job-store purge keeps up --------------------------------------------------------

def test_purge_batches_are_bounded_in_bytes():
    ids = [f"{i:064d}" for i in range(5000)]
    chunks = purge_batches(ids, 64 * 1024)
    assert [j for ch in chunks for j in ch] == ids
    assert len(chunks) > 1
    for ch in chunks:
        assert len(encode(c.PurgeJobs(ch, 1.0))) <= 64 * 1024 + 64


class _PurgeRaft(_Raft):
    """test_clock_use's fake Raft host, recording each command's encoded size."""

    async def submit(self, command, timeout):
        self.sent.append(len(encode(command)))
        return self.st.apply(command)


def test_the_purge_keeps_up_with_a_backlog_larger_than_one_round():
    from jm.cluster.members.resourcemanager import PURGE_PER_ROUND, ResourceManager
    st = ClusterState()
    n = PURGE_PER_ROUND + 6000
    st.apply(c.SubmitJobs(tuple(c.SubmitJob(f"job-{i:08d}", {}, 1.0) for i in range(n))))
    for i in range(n):
        st.apply(c.CancelJob(f"job-{i:08d}", 1.0))
    raft, mono = _PurgeRaft(st), [1000.0]
    rm = ResourceManager(raft, 3.0, 1.0, monotonic=lambda: mono[0], expiration=3600.0,
                         capacity=0, purge_every=10.0)
    asyncio.run(rm._purge())
    assert len(st.jobs) == n - PURGE_PER_ROUND  # one round: several bounded commands
    assert len(raft.sent) > 1 and max(raft.sent) <= 64 * 1024 + 64
    asyncio.run(rm._purge())  # at once (no purge_every wait) while there is more
    assert st.jobs == {}
    sent = len(raft.sent)
    asyncio.run(rm._purge())  # nothing left: back to one round per purge_every
    assert len(raft.sent) == sent
