"""deploy/grafana/jobmanager-dashboard.json and deploy/prometheus/alerts.yml use only metrics
that real peers export: every metric name in their PromQL is scraped from the /metrics of
the leader and of a follower of a 2-peer in-process cluster."""
import json
import os
import re

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import running
from tests.helpers import ahttp, apoll

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "jobmanager-dashboard.json")
ALERTS = os.path.join(ROOT, "deploy", "prometheus", "alerts.yml")
# series Prometheus makes itself at each scrape, never in /metrics
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
            "and", "or", "unless", "inf", "nan"}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (functions, aggregations, keywords,
    label names, strings, durations and Grafana $variables are not names)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings first (they may hold { } [ ])
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # range and subquery durations
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.$:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", e):
        if m.group(1).lower() not in KEYWORDS:
            names.add(m.group(1))
    return names


def test_metric_names_of_promql():
    assert metric_names('histogram_quantile(0.99, sum by (route, le) (rate('
                        'jm_rest_request_duration_seconds_bucket{job="$job"}[5m])))') == {
        "jm_rest_request_duration_seconds_bucket"}
    assert metric_names('(max(jm_raft_leader{job="x"}) or vector(0)) < 1') == {"jm_raft_leader"}
    assert metric_names('max(a_b{s="{x}"}) - max(a_b offset 15m) > 5e3 and on (peer) c_d'
                        ' / ignoring(dir) e:f') == {"a_b", "c_d", "e:f"}
    assert metric_names("up == 0") == {"up"}


def dashboard_exprs() -> list[str]:
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = []
    for panel in dash["panels"]:
        assert panel["title"] and panel["targets"], panel.get("title")
        out.extend(t["expr"] for t in panel["targets"])
    return out


def alert_exprs() -> list[str]:
    with open(ALERTS) as f:
        rules = yaml.safe_load(f)
    out = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["alert"] and rule["labels"]["severity"] in ("warning", "critical")
            assert re.fullmatch(r"\d+[smh]", rule.get("for", "0s")), rule["alert"]
            out.append(rule["expr"])
    return out


def test_deploy_files_cover_what_operators_need():
    dash = " ".join(dashboard_exprs())
    for name in ("jm_cluster_jobs", "jm_cluster_peers", "jm_raft_leader",
                 "jm_rest_request_duration_seconds_bucket", "process_resident_memory_bytes",
                 "jm_raft_commit_index", "jm_job_restarts_total",
                 "jm_failovers_detected_total", "jm_job_last_batch_timestamp_seconds",
                 "jm_job_processed_rows_per_second", "jm_job_input_rows_per_second",
                 "jm_job_state_rows", "jm_job_batch_duration_seconds", "jm_job_up"):
        assert name in metric_names(dash), name
    with open(ALERTS) as f:
        alerts = {r["alert"]: r for g in yaml.safe_load(f)["groups"] for r in g["rules"]}
    assert alerts["JobManagerNoLeader"]["for"] == "30s"
    assert {"jm_job_last_batch_timestamp_seconds", "jm_job_up"} <= metric_names(
        alerts["JobManagerPipelineNotProgressing"]["expr"])
    for name in ("JobManagerPeerDead", "JobManagerJobFailuresHigh", "JobManagerRSSHigh",
                 "JobManagerDiskLow"):
        assert name in alerts


def exported(text: str) -> set[str]:
    names = set()
    for fam in text_string_to_metric_families(text):
        names.add(fam.name)
        names.update(s.name for s in fam.samples)
        if fam.type == "histogram":
            names.update(fam.name + s for s in HISTOGRAM_SUFFIXES)
    return names


@pytest.mark.timeout(120)
async def test_every_metric_of_the_dashboard_and_alerts_is_exported(tmp_path):
    used = set()
    for expr in dashboard_exprs() + alert_exprs():
        used |= metric_names(expr)
    used -= PROMETHEUS_OWN
    assert len(used) > 10
    async with running(str(tmp_path), 2) as c:
        async def scrapes():
            texts = []
            for u in c.urls:
                await ahttp("GET", u + "/overview")  # a REST latency observation
                s, text = await ahttp("GET", u + "/metrics")
                texts.append(str(text))
            leaders = [t for t in texts if re.search(r"^jm_raft_leader\{.*\} 1\.0$", t, re.M)]
            return texts if len(leaders) == 1 else None
        texts = await apoll(scrapes, 30, what="one leader among the scrapes")
        lead = 0 if re.search(r"^jm_raft_leader\{.*\} 1\.0$", texts[0], re.M) else 1
        leader, follower = exported(texts[lead]), exported(texts[1 - lead])
        assert sorted(used - leader) == []  # the leader exports every one
        # per-peer metrics on every peer; cluster-wide ones on the leader only
        assert sorted(n for n in used - follower if not n.startswith("jm_cluster_")) == []
        assert not [n for n in follower if n.startswith("jm_cluster_")]
