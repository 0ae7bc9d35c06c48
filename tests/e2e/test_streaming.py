"""A Structured Streaming job (examples/streaming_events.py) keeps exactly-once output while
the peer running it is killed twice: it resumes from its checkpoint on another peer, and
the Parquet sink ends with every expected row exactly once."""
import collections
import datetime
import os
import signal

import pytest

from chaos.streaming import BASE_TS, expected, write_events
from tests.e2e.procs import ProcessCluster
from tests.helpers import ROOT, http, poll

pytestmark = pytest.mark.slow


def make_events(batch: int, files: int, per_file: int) -> list[list[dict]]:
    out = []
    for k in range(files):
        evs = []
        for n in range(per_file):
            i = (batch * files + k) * per_file + n
            ts = BASE_TS + datetime.timedelta(seconds=7 * i)  # spans many 1-minute windows
            evs.append({"user": f"u{i % 3}", "ts": ts.isoformat(), "amount": i % 10})
        out.append(evs)
    return out


@pytest.fixture
def cluster(tmp_path):
    c = ProcessCluster(str(tmp_path), 3, {
        "spark.connect.embedded": True, "spark.master": "local[1]",
        "spark.driver.memory": "512m", "spark.conf.spark.sql.shuffle.partitions": 2,
        "jobmanager.executor.preload": "pyspark"})
    try:
        c.start()
        c.wait_spark()
        yield c
    finally:
        c.stop()


def committed_batches(checkpoint: str) -> int:
    d = os.path.join(checkpoint, "events", "commits")
    return max([int(n) + 1 for n in os.listdir(d) if n.isdigit()], default=0) \
        if os.path.isdir(d) else 0


def test_streaming_job_is_exactly_once_across_two_moves(cluster, tmp_path):
    c = cluster
    src, sink = tmp_path / "events", tmp_path / "agg"
    src.mkdir()
    s, b = http("POST", c.urls[0] + "/jobs", {
        "name": "events-per-minute", "entry": "streaming_events:main", "job-type": "streaming",
        "pyfiles": [os.path.join(ROOT, "examples", "streaming_events.py")],
        "args": {"input": str(src), "output": str(sink), "files-per-trigger": 2},
        "restart-strategy": {"type": "fixed-delay", "attempts": 10, "delay": "500 ms"}})
    assert s == 202, b
    jid = b["jobid"]
    checkpoint = os.path.join(c.base, "ha", jid, "checkpoints")
    fed = []
    for batch in range(3):
        for k, evs in enumerate(make_events(batch, files=4, per_file=10)):
            write_events(str(src), f"b{batch}-{k}", evs)
            fed += evs
        done = committed_batches(checkpoint)
        poll(lambda: committed_batches(checkpoint) > done, 240, interval=0.5,
             what=f"a micro-batch committed after feeding batch {batch}")
        if batch < 2:  # kill the owner twice: the job must move and resume
            job = http("GET", c.urls[0] + f"/jobs/{jid}")[1]
            i = next(k for k, line in enumerate(c.lines) if line.endswith(job["node"].split(":")[1]))
            os.kill(c.peer_pid(i), signal.SIGKILL)
            poll(lambda: (lambda j: j["state"] == "RUNNING" and j["attempt"] > job["attempt"])(
                http("GET", c.urls[(i + 1) % 3] + f"/jobs/{jid}")[1]), 60, interval=0.2,
                what="the streaming job running again elsewhere")
            c.start_peer(i)
    # an event far ahead moves the watermark past every window fed so far
    write_events(str(src), "flush", [{"user": "flush", "ts": "2026-01-02T00:00:00",
                                      "amount": 0}])
    want = expected(fed)

    def sink_rows():
        s, b = http("POST", c.urls[1] + "/jobs", {
            "sql": f"SELECT CAST(window_start AS STRING) AS w, user, events, amount "
                   f"FROM parquet.`{sink}`"})
        job = poll(lambda: (lambda r: r if r["state"] in ("FINISHED", "FAILED") else None)(
            http("GET", c.urls[1] + f"/jobs/{b['jobid']}/result")[1]), 120, interval=0.3)
        return job.get("result", {}).get("rows", []) if job["state"] == "FINISHED" else []

    rows = poll(lambda: (lambda r: r if len(r) >= len(want) else None)(sink_rows()), 240,
                interval=2, what="every window in the sink")
    got = collections.Counter((datetime.datetime.fromisoformat(w).isoformat(), u)
                              for w, u, _, _ in rows)
    assert all(n == 1 for n in got.values()), "duplicated rows in the sink"
    assert {(datetime.datetime.fromisoformat(w).isoformat(), u): (e, a)
            for w, u, e, a in rows} == want
    job = http("GET", c.urls[2] + f"/jobs/{jid}")[1]
    assert job["attempt"] >= 3 and job["state"] == "RUNNING"
    assert len({a["node"] for a in job["attempts"]}) >= 2
    s, _ = http("PATCH", c.urls[2] + f"/jobs/{jid}?mode=cancel")
    assert s == 202
