"""Issue 31, pure parts: a streaming job's progress kept small (jm/policy/jobs/progress.py),
committed at most once per interval and coalesced (ProgressGate), exported per job with
bounded labels (jm/cluster/metrics.py job_gauges), and job output framed for the peer's
stdout (jm/policy/jobs/logtee.py); plus the state machine's handling of a progress report."""
import json
from types import SimpleNamespace

from jm.cluster.metrics import job_gauges
from jm.policy.jobs.logtee import MAX_LINE, frame, split_lines
from jm.policy.jobs.progress import (MAX_NAME, MAX_QUERIES, MAX_SIZE, ProgressGate, bounded,
                                     merged, progress_view, query_entry)
from raft import commands as c
from raft.state import ClusterState

RAW = {"name": "clicks", "id": "9f", "batchId": 7, "numInputRows": 120,
       "inputRowsPerSecond": 40.123456, "processedRowsPerSecond": float("nan"),
       "batchDuration": 310, "stateOperators": [{"numRowsTotal": 5}, {"numRowsTotal": 6}]}


def test_query_entry_keeps_numbers_only():
    e = query_entry(RAW, 1000.0)
    assert e == {"name": "clicks", "batch": 7, "time": 1000.0, "input-rows": 120,
                 "input-rows-per-second": 40.123, "processed-rows-per-second": None,
                 "batch-duration-ms": 310, "state-rows": 11}
    assert query_entry({"id": "abc", "stateOperators": []}, 1.0)["name"] == "abc"
    assert query_entry({}, 1.0)["state-rows"] is None  # stateless: no state rows
    assert len(query_entry({"name": "x" * 1000}, 1.0)["name"]) == MAX_NAME


def test_merged_replaces_a_query_and_keeps_the_newest_few():
    p = None
    for i in range(MAX_QUERIES + 5):
        p = merged(p, query_entry({"name": f"q{i:02d}", "batchId": i}, float(i)))
    p = merged(p, query_entry({"name": "q12", "batchId": 99}, 100.0))
    names = [q["name"] for q in p["queries"]]
    assert len(names) == MAX_QUERIES and names == sorted(names)
    assert "q00" not in names and "q12" in names
    assert [q["batch"] for q in p["queries"] if q["name"] == "q12"] == [99]
    assert p["time"] == 100.0
    assert len(json.dumps(p)) < MAX_SIZE


def test_bounded_takes_known_fields_and_refuses_the_rest():
    assert bounded(None) is None and bounded({"queries": "x"}) is None
    big = {"time": 5, "junk": "x" * 10000, "queries": [
        {"name": "n" * 500, "batch": "7", "state-rows": 3, "extra": [1] * 1000}] * 50 + [3]}
    b = bounded(big)
    assert "junk" not in b and len(b["queries"]) <= MAX_QUERIES
    assert b["queries"][0]["batch"] is None and b["queries"][0]["state-rows"] == 3
    assert "extra" not in b["queries"][0]
    assert len(json.dumps(b)) < MAX_SIZE


def test_gate_sends_first_at_once_then_coalesces_within_the_interval():
    g = ProgressGate(5.0)
    g, out = g.offer({"n": 1}).take(0.0)
    assert out == {"n": 1}
    g = g.offer({"n": 2}).offer({"n": 3})  # two within the interval: only the newest goes
    g, out = g.take(4.9)
    assert out is None and round(g.wait(4.9), 6) == 0.1
    g, out = g.take(5.0)
    assert out == {"n": 3} and g.wait(5.0) is None
    g, out = g.offer({"n": 3}).take(100.0)  # unchanged: not sent again
    assert out is None
    g, out = g.offer({"n": 4}).take(100.0)
    assert out == {"n": 4}


def test_gate_sends_at_most_once_per_interval_over_a_run():
    g, sent = ProgressGate(5.0), []
    for tick in range(600):  # a progress every 0.1 s for a minute
        g, out = g.offer({"n": tick}).take(tick / 10)
        if out is not None:
            sent.append(tick / 10)
    assert len(sent) == 12
    assert all(b - a >= 5.0 for a, b in zip(sent, sent[1:]))


def _job(jid, status="RUNNING", tenant=None, progress=None):
    return SimpleNamespace(id=jid, status=status, tenant=tenant, progress=progress)


def test_job_gauges_per_job_with_tenant_labels():
    p = {"time": 10.0, "queries": [
        {"name": "a", "time": 9.0, "input-rows-per-second": 2.0, "processed-rows-per-second":
         3.0, "batch-duration-ms": 500, "state-rows": 4},
        {"name": "b", "time": 10.0, "input-rows-per-second": 1.0, "processed-rows-per-second":
         None, "batch-duration-ms": 1500, "state-rows": None}]}
    g = job_gauges([_job("j1", tenant="team-a", progress=p), _job("j2", "RESTARTING", None, p),
                    _job("j3")])
    up = dict(g["jm_job_up"][2])
    assert up == {("j1", "team-a"): 1, ("j2", "default"): 0, ("j3", "default"): 1}
    one = {k: dict(v[2]) for k, v in g.items()}
    assert one["jm_job_last_batch_timestamp_seconds"] == {("j1", "team-a"): 10.0}
    assert one["jm_job_input_rows_per_second"] == {("j1", "team-a"): 3.0}
    assert one["jm_job_processed_rows_per_second"] == {("j1", "team-a"): 3.0}
    assert one["jm_job_batch_duration_seconds"] == {("j1", "team-a"): 1.5}
    assert one["jm_job_state_rows"] == {("j1", "team-a"): 4}
    assert all(v[1] == ("job", "tenant") for v in g.values())
    assert job_gauges([])["jm_job_up"][2] == []


def test_progress_view_in_ms():
    assert progress_view(None) is None
    v = progress_view({"time": 1.5, "queries": [{"name": "a", "time": 2.25, "batch": 3}]})
    assert v == {"time": 1500, "queries": [{"name": "a", "time": 2250, "batch": 3}]}


def test_split_lines_waits_for_a_line_end_and_cuts_long_lines():
    lines, rest = split_lines(b"", b"one\r\ntw")
    assert lines == [b"one"] and rest == b"tw"
    lines, rest = split_lines(rest, b"o\n\nthree")
    assert lines == [b"two", b""] and rest == b"three"
    lines, rest = split_lines(b"", b"x" * (2 * MAX_LINE + 3))
    assert lines == [b"x" * MAX_LINE] * 2 and rest == b"xxx"
    lines, _ = split_lines(b"", b"y" * (MAX_LINE + 9) + b"\n")
    assert lines == [b"y" * MAX_LINE]


def test_frame_text_and_json():
    assert frame(b"hello \xff", "j1", "2-0", "text", "n1") == "[job=j1 attempt=2-0] hello \\xff"
    obj = json.loads(frame(b"hi", "j1", "2-0", "json", "n1", "2026-11-26T18:00:00.000Z"))
    assert obj["job"] == "j1" and obj["attempt"] == "2-0" and obj["message"] == "hi"
    assert obj["time"].endswith("Z") and obj["node"] == "n1"


def test_state_machine_keeps_progress_without_changing_status():
    from raft.records import JobRecord
    from raft.jobs import _report_one
    st = ClusterState()
    job = JobRecord("j1", "j", {"job-type": "streaming"}, 0.0, status="RESTARTING", node="n1",
                    epoch=3)
    st.jobs["j1"] = job
    r = _report_one(st, c.StatusReport("j1", 3, "n1", "RUNNING", 1.0, seq=5,
                                       progress={"time": 1.0, "queries": []}))
    assert r.ok and job.status == "RESTARTING" and job.progress == {"time": 1.0, "queries": []}
    r = _report_one(st, c.StatusReport("j1", 2, "n1", "RUNNING", 1.0, progress={"x": 1}))
    assert not r.ok and r.code == "stale" and job.progress == {"time": 1.0, "queries": []}
    r = _report_one(st, c.StatusReport("j1", 3, "n1", "RUNNING", 1.0, progress=[1]))
    assert not r.ok and r.code == "invalid"
    blob = c.encode(c.ReportStatuses((c.StatusReport("j1", 3, "n1", "RUNNING", 1.0,
                                                     progress={"time": 2.0}),)))
    assert c.decode(blob).reports[0].progress == {"time": 2.0}
