"""/metrics through prometheus_client on real in-process peers: every series but the
cluster-wide ones carries its peer's id; the cluster-wide jm_cluster_* series come from the
leader only (a sum() over peers is right); process metrics (the control plane's RSS) are
there; OpenMetrics is served to a scraper that asks for it."""
import os

from prometheus_client.openmetrics.parser import \
    text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from tests.conftest import running
from tests.helpers import ahttp, apoll

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


async def scrape(url: str, accept: str | None = None) -> tuple[str, str]:
    headers = {"Accept": accept} if accept else {}
    s, text, h = await ahttp("GET", url + "/metrics", headers=headers, with_headers=True)
    assert s == 200
    return h["Content-Type"], text


def samples(text: str) -> list:
    return [s for fam in parse_text(text) for s in fam.samples]


async def test_leader_alone_exports_cluster_series_and_openmetrics(tmp_path):
    async with running(str(tmp_path), 2) as c:
        nodes = [p.node for p in c.peers]
        s, b = await ahttp("POST", c.url(0) + "/jobs", {"entry": "jobs_fixture:quick",
                                                        "pyfiles": [FIX]})
        assert s in (200, 201, 202), b
        jid = b["jobid"]

        async def finished():
            s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
            return s == 200 and b["state"] == "FINISHED"
        await apoll(finished, 30, what="the job finished")

        async def scrapes():  # one leader, the same as the peers' own view, and its view of
            texts = [(await scrape(u))[1] for u in c.urls]  # the job applied
            leads = [[x.value for x in samples(t) if x.name == "jm_raft_leader"] for t in texts]
            if sorted(leads) != [[0.0], [1.0]]:
                return None
            lead = 0 if leads[0] == [1.0] else 1
            if not any(x.name == "jm_cluster_jobs" and x.labels == {"state": "FINISHED"}
                       and x.value == 1 for x in samples(texts[lead])):
                return None
            return lead, texts
        lead, texts = await apoll(scrapes, 30, what="a leader's scrape with the finished job")
        follower = 1 - lead
        lt, ft = samples(texts[lead]), samples(texts[follower])
        assert [x.value for x in lt if x.name == "jm_cluster_peers"
                and x.labels == {"state": "ALIVE"}] == [2]
        assert [x.value for x in lt if x.name == "jm_cluster_slots"]
        assert not [x for x in ft if x.name.startswith("jm_cluster_")]  # followers: none
        for i, smp in ((lead, lt), (follower, ft)):
            own = [x for x in smp if not x.name.startswith("jm_cluster_")]
            assert own and all(x.labels.get("peer") == nodes[i] for x in own), nodes[i]
            assert [x for x in own if x.name == "process_resident_memory_bytes"
                    and x.value > 0]
            for name in ("jm_raft_term", "jm_raft_commit_index", "jm_lease_valid",
                         "jm_job_restarts_total", "jm_disk_free_bytes", "python_info",
                         "jm_raft_snapshots_total", "jm_raft_snapshot_seconds"):
                assert [x for x in own if x.name == name], (name, nodes[i])
            # renewed every heartbeat interval: its lease aged about that much, far from
            # the lease timeout (a leader change would show here)
            ages = [x.value for x in own if x.name == "jm_lease_age_max_seconds"]
            assert ages and 0 <= ages[0] < 3.0, (ages, nodes[i])
        assert "jm_jobs" not in {x.name for x in lt + ft}  # the old per-replica name is gone

        ctype, text = await scrape(c.url(follower))
        assert ctype.startswith("text/plain") and "version=0.0.4" in ctype
        assert "# EOF" not in text
        ctype, text = await scrape(c.url(lead), OPENMETRICS)
        assert ctype.startswith("application/openmetrics-text"), ctype
        assert text.endswith("# EOF\n")
        fams = {f.name: f for f in parse_openmetrics(text)}  # a strict parser
        assert fams["jm_job_restarts"].type == "counter"
        assert fams["jm_cluster_jobs"].type == "gauge"
        assert fams["jm_rest_request_duration_seconds"].type == "histogram"
        lag = fams["jm_event_loop_lag_seconds"]  # measured since the peer started
        assert lag.type == "histogram"
        assert next(s.value for s in lag.samples if s.name.endswith("_count")) > 0
        # the submission's write on the peer asked, labelled with that peer's role when
        # it wrote (not asserted against `lead`: leadership may have moved since on a busy
        # machine): a batch of one (SubmitJobs) if it led, else the job relayed into the
        # leader's batch (SubmitJob, a follower's; the batch is the leader's write); the
        # job's status reports by the peer running it
        writes = [x for x in samples(texts[0]) + samples(texts[1])
                  if x.name == "jm_raft_write_seconds_count"]
        assert [x.value for x in writes if x.labels["command"] == "SubmitJobs"] == [1.0]
        asked = [(x.labels["command"], x.labels["role"]) for x in writes
                 if x.labels["peer"] == nodes[0] and x.labels["command"].startswith("Submit")]
        assert asked in ([("SubmitJobs", "leader")], [("SubmitJob", "follower")]), writes
        assert [x for x in writes if x.labels["command"] == "ReportStatuses"], writes
        assert all(x.labels["role"] in ("leader", "follower") for x in writes)
        assert fams["process_resident_memory_bytes"].samples[0].value > 0
