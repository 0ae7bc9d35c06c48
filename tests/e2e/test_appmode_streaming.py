"""A streaming spark-submit style application (classic mode, its own driver per attempt)
takes a stop-with-savepoint, resumes from it, and moves with a drain, exactly once into a
file sink: on each graceful stop the runner stops its queries, awaitTermination()
returns and the script ends by itself."""
import datetime
import os

import pytest

from chaos.streaming import BASE_TS, check_sink, sink_sql, write_events
from tests.e2e.procs import ProcessCluster
from tests.helpers import http, poll

pytestmark = pytest.mark.slow
APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apps", "events_script.py")
from jm.policy.jobs.vocab import TERMINAL  # the states a job ends in


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


def committed_batches(checkpoint: str) -> int:
    d = os.path.join(checkpoint, "events", "commits")
    return max([int(n) + 1 for n in os.listdir(d) if n.isdigit()], default=0) \
        if os.path.isdir(d) else 0


@pytest.fixture
def cluster(tmp_path):
    c = ProcessCluster(str(tmp_path), 3, {
        "spark.connect.embedded": False, "spark.master": "local[1]",
        "spark.conf.spark.sql.shuffle.partitions": 2, "spark.conf.spark.driver.memory": "512m",
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 5})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def get(c, path, peer=0):
    s, b = http("GET", c.urls[peer] + path)
    assert s == 200, b
    return b


def feed(src, batch, fed):
    for k, evs in enumerate(make_events(batch, files=2, per_file=10)):
        write_events(str(src), f"b{batch}-{k}", evs)
        fed += evs


def logs(c, jid, attempt):
    return get(c, f"/jobs/{jid}/logs?attempt={attempt}")["text"]


def test_streaming_script_stop_resume_and_drain_exactly_once(cluster, tmp_path):
    c = cluster
    src, sink = tmp_path / "events", tmp_path / "agg"
    src.mkdir()
    fed: list = []
    s, b = http("POST", c.urls[0] + "/jobs", {"script": APP, "argv": [str(src), str(sink)],
                                              "job-type": "streaming"})
    assert s == 202, b
    first = b["jobid"]
    cp1 = os.path.join(c.base, "ha", first, "checkpoints")
    feed(src, 0, fed)
    poll(lambda: committed_batches(cp1) > 0, 240, interval=0.5, what="a first micro-batch")

    # stop with a savepoint: the script ends by itself, the job FINISHED
    s, b = http("POST", c.urls[1] + f"/jobs/{first}/stop", {})
    assert s == 202, b
    sp = poll(lambda: (lambda r: r if r["status"]["id"] == "COMPLETED" else None)(
        get(c, f"/jobs/{first}/savepoints/{b['request-id']}", 1)), 120, interval=0.3,
        what="the stop's savepoint")
    location = sp["operation"]["location"]
    job = poll(lambda: (lambda j: j if j["state"] in TERMINAL else None)(
        get(c, f"/jobs/{first}")), 60, what="the stopped job ended")
    assert job["state"] == "FINISHED", job
    assert "the application ends by itself" in logs(c, first, 1)

    # resume from it, then drain its peer: a planned move to another peer
    s, b = http("POST", c.urls[2] + "/jobs", {"script": APP, "argv": [str(src), str(sink)],
                                              "job-type": "streaming",
                                              "savepoint-path": location})
    assert s == 202, b
    jid = b["jobid"]
    cp2 = os.path.join(c.base, "ha", jid, "checkpoints")
    restored = poll(lambda: committed_batches(cp2), 60, interval=0.2,
                    what="the savepoint restored into the new job's checkpoint")
    feed(src, 1, fed)
    poll(lambda: committed_batches(cp2) > restored, 240, interval=0.5,
         what="a micro-batch of the resumed job")
    owner = get(c, f"/jobs/{jid}")["node"]
    s, b = http("POST", c.urls[0] + f"/nodes/{owner}/drain")
    assert s == 202, b
    moved = poll(lambda: (lambda j: j if j["state"] == "RUNNING" and j["attempt"] > 1
                          and j["node"] != owner else None)(get(c, f"/jobs/{jid}")), 180,
                 interval=0.3, what="the job moved off the drained peer")
    assert "the application ends by itself" in logs(c, jid, 1)
    s, _ = http("DELETE", c.urls[0] + f"/nodes/{owner}/drain")
    assert s == 200
    done = committed_batches(cp2)
    feed(src, 2, fed)
    poll(lambda: committed_batches(cp2) > done, 240, interval=0.5,
         what="a micro-batch after the move")
    write_events(str(src), "flush", [{"user": "flush", "ts": "2026-01-02T00:00:00",
                                      "amount": 0}])

    def sink_rows():  # read through Spark (it honours the sink's _spark_metadata log)
        s, b = http("POST", c.urls[1] + "/jobs", {"sql": sink_sql(str(sink)),
                                                  "spark-mode": "classic"})
        assert s == 202, b
        r = poll(lambda: (lambda r: r if r["state"] in TERMINAL else None)(
            get(c, f"/jobs/{b['jobid']}/result", 1)), 180, interval=0.3, what="the sink read")
        assert r["state"] == "FINISHED", r
        return r["result"]["rows"]
    want = len({(e["ts"][:16], e["user"]) for e in fed})
    rows = poll(lambda: (lambda r: r if len(r) >= want else None)(sink_rows()), 300,
                interval=1, what="every window in the sink")
    report = check_sink(rows, fed)
    assert report["ok"], report["errors"]
    assert len({a["node"] for a in get(c, f"/jobs/{jid}")["attempts"]}) == 2
    assert moved["attempts"][0].get("spark-app-id") != moved["attempts"][1].get("spark-app-id")
    s, _ = http("PATCH", c.urls[2] + f"/jobs/{jid}?mode=cancel")
    assert s == 202
    poll(lambda: get(c, f"/jobs/{jid}")["state"] == "CANCELED", 60, what="cancelled")
