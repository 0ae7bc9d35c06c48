"""Config-driven rebalancing and drain with real Spark streaming jobs: 2 peers run 6
streaming pipelines; the 3rd peer of conf/masters starts and, with rebalance.strategy
on-join, jobs move to it until the peers are within rebalance.threshold; then a peer is
drained to zero jobs. Every sink ends with every expected row exactly once; a
stop-with-savepoint and a resume from it lose nothing either."""
import datetime
import os
import time

import pytest

from tests.e2e.procs import ProcessCluster
from chaos.streaming import BASE_TS, check_sink, expected, write_events
from tests.helpers import ROOT, http, poll

# 3 Spark servers on 2 cores, 6 streaming jobs moved and resumed: ~50 s on an idle
# machine, ~320 s with two other busy processes; the polls' own deadlines name what hung
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
JOBS = 6
EXAMPLE = os.path.join(ROOT, "examples", "streaming_events.py")


@pytest.fixture
def cluster(tmp_path):
    c = ProcessCluster(str(tmp_path), 3, {
        "spark.connect.embedded": True, "spark.master": "local[1]",
        "spark.driver.memory": "512m", "spark.conf.spark.sql.shuffle.partitions": 2,
        "jobmanager.slots": 4, "rebalance.strategy": "on-join", "rebalance.interval": "2 s",
        "rebalance.max-moves-per-round": 2, "rebalance.threshold": 1,
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 5})
    try:
        c.start(only=[0, 1])
        c.wait_spark(only=[0, 1])
        yield c
    finally:
        c.stop()


class Feed:
    """Known events per job, fed in rounds of one file per job."""

    def __init__(self, base):
        self.dirs = [base / f"events{j}" for j in range(JOBS)]
        self.sinks = [base / f"agg{j}" for j in range(JOBS)]
        self.fed = [[] for _ in range(JOBS)]
        self.rounds = 0
        for d in self.dirs:
            d.mkdir()

    def round(self):
        for j in range(JOBS):
            evs = []
            for n in range(6):
                i = self.rounds * 6 + n
                ts = BASE_TS + datetime.timedelta(seconds=13 * i + j)
                evs.append({"user": f"u{(i + j) % 2}", "ts": ts.isoformat(), "amount": i % 7})
            write_events(str(self.dirs[j]), f"r{self.rounds}", evs)
            self.fed[j] += evs
        self.rounds += 1

    def flush(self):
        for d in self.dirs:  # moves every watermark past the windows fed so far
            write_events(str(d), "flush", [{"user": "flush", "ts": "2026-01-03T00:00:00",
                                            "amount": 0}])


def jobs(c, ids, peer=0):
    return [http("GET", c.urls[peer] + f"/jobs/{j}")[1] for j in ids]


def nodes(c, peer=0):
    return {n["id"]: n for n in http("GET", c.urls[peer] + "/nodes")[1]["nodes"]}


def committed(c, jid):
    """The last committed micro-batch + 1 (Spark keeps only the last 100 commit files)."""
    d = os.path.join(c.base, "ha", jid, "checkpoints", "events", "commits")
    return max([int(n) + 1 for n in os.listdir(d) if n.isdigit()], default=0) \
        if os.path.isdir(d) else 0


def all_running(c, ids, peer=0):
    js = jobs(c, ids, peer)
    return js if all(j["state"] == "RUNNING" for j in js) else None


def feed_and_wait(c, feed, ids):
    before = [committed(c, j) for j in ids]
    feed.round()
    poll(lambda: all(committed(c, j) > b for j, b in zip(ids, before)), 300, interval=0.5,
         what="every job committed the new round")


def sink_rows(c, feed):
    union = " UNION ALL ".join(
        f"SELECT {j} AS job, CAST(window_start AS STRING) AS w, user, events, amount "
        f"FROM parquet.`{feed.sinks[j]}`" for j in range(JOBS))
    s, b = http("POST", c.urls[1] + "/jobs", {"sql": union})
    assert s == 202, b
    res = poll(lambda: (lambda r: r if r["state"] in ("FINISHED", "FAILED") else None)(
        http("GET", c.urls[1] + f"/jobs/{b['jobid']}/result")[1]), 180, interval=0.5)
    assert res["state"] == "FINISHED", res
    return res["result"]["rows"]


def check_sinks(c, feed, stall=150.0):
    """Every sink holds exactly the expected windows, each once. A slow machine gets as
    long as the sinks keep growing; after `stall` s without a new row the test fails
    naming what each sink misses (or why it could not be read)."""
    want = sum(len(expected(feed.fed[j])) for j in range(JOBS))
    best, grew, failure = [], time.monotonic(), None

    def complete():
        nonlocal best, grew, failure
        try:
            rows = sink_rows(c, feed)
        except AssertionError as exc:  # the query failed or did not finish
            rows, failure = [], exc
        if len(rows) > len(best):
            best, grew = rows, time.monotonic()
        return len(best) >= want or time.monotonic() - grew > stall
    poll(complete, 900, interval=2, what="every window in every sink")
    per_job = {j: check_sink([r[1:] for r in best if r[0] == j], feed.fed[j])
               for j in range(JOBS)}
    assert all(r["ok"] for r in per_job.values()), \
        f"sinks differ from the expected aggregation (last failed read: {failure}): " \
        f"{ {j: r['errors'] for j, r in per_job.items() if not r['ok']} }"


def test_on_join_rebalance_and_drain_keep_every_row_once(cluster, tmp_path):
    c = cluster
    feed = Feed(tmp_path)
    ids = []
    for j in range(JOBS):
        s, b = http("POST", c.urls[j % 2] + "/jobs", {
            "name": f"events-{j}", "entry": "streaming_events:main", "pyfiles": [EXAMPLE],
            "job-type": "streaming",
            "args": {"input": str(feed.dirs[j]), "output": str(feed.sinks[j]),
                     "trigger": "1 second"}})
        assert s == 202, b
        ids.append(b["jobid"])
    poll(lambda: all_running(c, ids), 240, interval=0.5, what="6 jobs running")
    feed_and_wait(c, feed, ids)
    started = [n for n in nodes(c).values() if n["state"] != "JOINING"]
    assert sorted(len(n["jobs"]) for n in started) == [3, 3]  # the 3rd is not started
    assert [n["state"] for n in nodes(c).values()].count("JOINING") == 1  # a member still

    # the third peer joins: jobs move to it until balanced within the threshold
    c.start_peer(2)
    c.wait_healthy(2)

    def balanced():
        n = nodes(c)
        counts = sorted(len(x["jobs"]) for x in n.values())
        return counts == [2, 2, 2] and all_running(c, ids)
    poll(balanced, 300, interval=0.5, what="on-join rebalance to 2/2/2")
    moved = [j for j in jobs(c, ids) if j["moves"]]
    assert len(moved) == 2
    for j in moved:
        assert [a["end-reason"] for a in j["attempts"]][-2] == "moved"
        assert j["node"] == c.lines[2].split(":")[0] + ":" + c.lines[2].split(":")[2]
    feed_and_wait(c, feed, ids)

    # drain peer 0: it ends with zero jobs, the others take them
    victim = c.lines[0].split(":")[0] + ":" + c.lines[0].split(":")[2]
    s, b = http("POST", c.urls[1] + f"/nodes/{victim}/drain")
    assert s == 202, b
    poll(lambda: nodes(c)[victim]["state"] == "DRAINED" and all_running(c, ids), 300,
         interval=0.5, what="peer drained")
    assert nodes(c)[victim]["jobs"] == []
    feed_and_wait(c, feed, ids)

    # stop one job with a savepoint and resume a new job from it, into the same sink
    s, b = http("POST", c.urls[2] + f"/jobs/{ids[0]}/stop", {})
    assert s == 202, b
    sp = poll(lambda: (lambda r: r if r["status"]["id"] == "COMPLETED" else None)(
        http("GET", c.urls[0] + f"/jobs/{ids[0]}/savepoints/{b['request-id']}")[1]), 120,
        interval=0.3, what="stop-with-savepoint")
    location = sp["operation"]["location"]
    assert http("GET", c.urls[0] + f"/jobs/{ids[0]}")[1]["state"] == "FINISHED"
    s, b = http("POST", c.urls[1] + "/jobs", {
        "name": "events-0-resumed", "entry": "streaming_events:main", "pyfiles": [EXAMPLE],
        "job-type": "streaming", "savepoint-path": location,
        "args": {"input": str(feed.dirs[0]), "output": str(feed.sinks[0]),
                 "trigger": "1 second"}})
    assert s == 202, b
    ids[0] = b["jobid"]
    poll(lambda: all_running(c, ids), 240, interval=0.5, what="resumed job running")
    feed_and_wait(c, feed, ids)
    feed.flush()
    check_sinks(c, feed)
    for jid in ids:
        http("PATCH", c.urls[1] + f"/jobs/{jid}?mode=cancel")
