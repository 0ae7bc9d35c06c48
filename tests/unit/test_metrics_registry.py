"""jm.cluster.metrics: a prometheus_client registry per peer, the peer label on the peer's
own series, cluster-wide series without it, content negotiation (pure, no peers)."""
from types import SimpleNamespace

from prometheus_client.openmetrics.parser import \
    text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from jm.cluster.metrics import PeerMetrics, cluster_gauges, families
from raft import state as S


def samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in parse_text(text) for s in f.samples}


def test_families_label_the_peers_own_series_and_not_the_cluster_ones():
    fams = {f.name: f for f in families("n1:1", {
        "jm_slots": ("slots", (), [((), 8)]),
        "jm_disk_free_bytes": ("free", ("dir",), [(("data",), 10), (("log",), 20)]),
        "jm_raft_fsyncs_total": ("fsyncs", (), [((), 3)]),
        "jm_cluster_jobs": ("jobs", ("state",), [(("RUNNING",), 2)]),
    })}
    assert fams["jm_slots"].type == "gauge"
    assert fams["jm_slots"].samples[0].labels == {"peer": "n1:1"}
    assert [s.labels for s in fams["jm_disk_free_bytes"].samples] == [
        {"peer": "n1:1", "dir": "data"}, {"peer": "n1:1", "dir": "log"}]
    assert fams["jm_raft_fsyncs"].type == "counter"  # a *_total read at scrape time
    assert fams["jm_raft_fsyncs"].samples[0].name == "jm_raft_fsyncs_total"
    assert fams["jm_cluster_jobs"].samples[0].labels == {"state": "RUNNING"}


def test_cluster_gauges_count_jobs_peers_and_alive_slots():
    peers = {"a": SimpleNamespace(id="a", state=S.ALIVE, draining=False, leaving=False,
                                  slots=4),
             "b": SimpleNamespace(id="b", state=S.DEAD, draining=False, leaving=False,
                                  slots=8)}
    jobs = {"j1": SimpleNamespace(status=S.RUNNING), "j2": SimpleNamespace(status=S.RUNNING),
            "j3": SimpleNamespace(status=S.FAILED)}
    counts = {}
    for j in jobs.values():
        counts[j.status] = counts.get(j.status, 0) + 1
    st = SimpleNamespace(jobs=jobs, status_counts=counts, peers=peers, jobs_of=lambda node: [],
                         alive_peers=lambda: [peers["a"]], slots_used=lambda node: 3)
    g = cluster_gauges(st)
    assert g["jm_cluster_jobs"][2] == [((S.FAILED,), 1), ((S.RUNNING,), 2)]
    assert g["jm_cluster_peers"][2] == [((S.ALIVE,), 1), ((S.DEAD,), 1)]
    assert g["jm_cluster_slots"][2] == [((), 4)]  # the dead peer's slots are not offered
    assert g["jm_cluster_slots_used"][2] == [((), 3)]
    assert all(name.startswith("jm_cluster_") for name in g)


def test_peers_of_one_process_share_no_metric():
    a, b = PeerMetrics("a:1"), PeerMetrics("b:2")
    a.restarts.inc()
    a.observe_rest("GET", "/jobs", 200, 0.003)
    body, ctype = b.render()
    vb = samples(body.decode())
    assert vb[("jm_job_restarts_total", (("peer", "b:2"),))] == 0
    assert not [k for k in vb if k[0] == "jm_rest_request_duration_seconds_count"]
    va = samples(a.render()[0].decode())
    assert va[("jm_job_restarts_total", (("peer", "a:1"),))] == 1
    assert va[("jm_rest_request_duration_seconds_count", (
        ("code", "200"), ("method", "GET"), ("peer", "a:1"), ("route", "/jobs")))] == 1
    assert va[("process_resident_memory_bytes", (("peer", "a:1"),))] > 0  # the process's
    assert [k for k in va if k[0] == "python_gc_collections_total"]


def test_content_negotiation_and_a_failing_gauge_reader():
    def broken():
        raise RuntimeError("no replica yet")
    m = PeerMetrics("a:1", broken)
    body, ctype = m.render(None)
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype
    assert b"jm_job_restarts_total" in body and not body.endswith(b"# EOF\n")
    body, ctype = m.render("application/openmetrics-text; version=1.0.0,text/plain;q=0.5")
    assert ctype.startswith("application/openmetrics-text")
    text = body.decode()
    assert text.endswith("# EOF\n")
    assert {f.name for f in parse_openmetrics(text)} >= {"jm_job_restarts",
                                                         "process_resident_memory_bytes"}
    m2 = PeerMetrics("a:1", lambda: {"jm_slots": ("slots", (), [((), 8)])})
    assert samples(m2.render()[0].decode())[("jm_slots", (("peer", "a:1"),))] == 8


def test_a_tenants_scrape_keeps_its_own_job_series_and_every_other_family():
    m = PeerMetrics("a:1", lambda: {
        "jm_slots": ("slots", (), [((), 8)]),
        "jm_job_up": ("up", ("job", "tenant"), [(("j1", "team-a"), 1), (("j2", "team-b"), 1),
                                                (("j3", "default"), 0)])})
    everything = samples(m.render()[0].decode())
    assert {k for k in everything if k[0] == "jm_job_up"} == {
        ("jm_job_up", (("job", j), ("peer", "a:1"), ("tenant", t)))
        for j, t in (("j1", "team-a"), ("j2", "team-b"), ("j3", "default"))}
    mine = samples(m.render(None, "team-a")[0].decode())
    assert {k for k in mine if k[0] == "jm_job_up"} == {
        ("jm_job_up", (("job", "j1"), ("peer", "a:1"), ("tenant", "team-a")))}
    assert mine[("jm_slots", (("peer", "a:1"),))] == 8
    assert any(k[0] == "jm_job_restarts_total" for k in mine)
    text = m.render("application/openmetrics-text", "nobody")[0].decode()
    fams = {f.name: f for f in parse_openmetrics(text)}
    assert fams["jm_job_up"].samples == [] and "jm_slots" in fams
