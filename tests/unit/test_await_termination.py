"""JobContext.await_termination (jm/runtime/jobrun.py): a streaming entry job waits for
its queries without polling them; a stop request stops them between micro-batches."""
import os
import signal
import threading

import pytest

from jm.policy.jobs.runparams import RunParams
from jm.runtime.jobrun import JobContext


class Query:
    """What await_termination uses of a pyspark StreamingQuery."""

    def __init__(self, fails=None):
        self.ended, self.fails, self.stops = threading.Event(), fails, 0

    @property
    def isActive(self):
        return not self.ended.is_set()

    def awaitTermination(self):
        self.ended.wait()
        if self.fails:
            raise self.fails

    def stop(self):
        self.stops += 1
        self.ended.set()


def _ctx(tmp_path):
    return JobContext(RunParams(job_id="j", attempt=1, node="n", log_path=str(tmp_path / "l"),
                                result_path=str(tmp_path / "r"), error_path=str(tmp_path / "e"),
                                checkpoint_dir=str(tmp_path / "c")))


def test_a_stop_request_stops_every_query_and_returns(tmp_path):
    ctx, a, b = _ctx(tmp_path), Query(), Query()
    threading.Timer(0.2, ctx.stop_requested.set).start()
    assert ctx.await_termination(a, b) is None
    assert (a.stops, b.stops) == (1, 1)


def test_a_failed_query_s_error_is_raised(tmp_path):
    ctx, q = _ctx(tmp_path), Query(fails=RuntimeError("boom"))
    threading.Timer(0.2, q.ended.set).start()
    with pytest.raises(RuntimeError, match="boom"):
        ctx.await_termination(q)
    assert q.stops == 0


def test_sigterm_reaches_a_job_waiting_in_the_main_thread(tmp_path):
    ctx, q = _ctx(tmp_path), Query()
    old = signal.signal(signal.SIGTERM, lambda *a: ctx.stop_requested.set())
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        ctx.await_termination(q)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert q.stops == 1
