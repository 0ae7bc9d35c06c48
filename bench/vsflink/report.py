"""The report of bench/vs_flink.py: medians, ratios, the Markdown tables and the chart."""
from __future__ import annotations

from bench.common import median


# --------------------------------------------------------------------------------- report

def _times(trials: list[dict], kind: str, k: int) -> list[float]:
    return [t["failover_s"] for t in trials if t["kind"] == kind and t["jobs"] == k
            and t["failover_s"] is not None]


def summarize(data: dict, ks: list[int]) -> dict:
    s: dict = {"failover": {}, "submission": {}, "rss_mb": {}}
    systems = {"flink_default": data.get("flink_default"), "flink_tuned": data.get("flink_tuned"),
               "ours_default": data.get("ours_default"), "ours_fast": data.get("ours_fast")}
    for name, d in systems.items():
        if not d:
            continue
        for k in ks:
            for kind in ("leader", "standby" if name.startswith("flink") else "follower"):
                rows = [t for t in d["trials"] if t["kind"] == kind and t["jobs"] == k]
                f = _times(d["trials"], kind, k)
                key = f"{'leader' if kind == 'leader' else 'non_leader'}_{k}"
                s["failover"].setdefault(key, {})[name] = {
                    "trials": len(rows), "median_s": median(f),
                    "min_s": min(f) if f else None, "max_s": max(f) if f else None,
                    "restarted_median": median([t["restarted"] for t in rows]),
                    "trials_with_jobs_stopped": sum(1 for t in rows if t["failover_s"] is None),
                    "surviving_restarted_total": sum(t["surviving_restarted"] for t in rows),
                    "moved_median": median([t.get("moved", 0) for t in rows]),
                    "jobs": k}
    for name in ("flink_submission", "ours_submission"):
        d = data.get(name)
        if not d:
            continue
        for clients in sorted({r["clients"] for r in d["runs"]}):
            rows = [r for r in d["runs"] if r["clients"] == clients]
            s["submission"].setdefault(f"clients_{clients}", {})[name.split("_")[0]] = {
                "runs": len(rows), "jobs_per_run": rows[0]["submitted"] + rows[0]["errors"],
                "submits_per_s": median([r["submits_per_s"] for r in rows]),
                "completed_per_s": median([r["completed_per_s"] for r in rows]),
                "p50_ms": median([r["p50_ms"] for r in rows]),
                "p99_ms": median([r["p99_ms"] for r in rows]),
                "errors": sum(r["errors"] + r["failed"] for r in rows)}
    kmax = max(ks)
    fl = [d for d in (data.get("flink_default"), data.get("flink_tuned")) if d]
    if fl:
        s["rss_mb"]["flink_leader_idle"] = median([d["rss_idle"]["leader_jm"] for d in fl])
        s["rss_mb"]["flink_standby_idle"] = median([d["rss_idle"]["standby_jm"] for d in fl])
        s["rss_mb"]["flink_leader_jobs"] = median([d[f"rss_jobs_{kmax}"]["leader_jm"]
                                                   for d in fl])
        s["rss_mb"]["flink_standby_jobs"] = median([d[f"rss_jobs_{kmax}"]["standby_jm"]
                                                    for d in fl])
        s["rss_mb"]["flink_taskmanager_jobs"] = median([d[f"rss_jobs_{kmax}"]["taskmanager"]
                                                        for d in fl])
    ours = [t for d in (data.get("ours_default"), data.get("ours_fast")) if d
            for t in d["trials"]]
    if ours:
        s["rss_mb"]["ours_peer_idle"] = median([max(t["rss_idle"]) for t in ours])
        s["rss_mb"]["ours_peer_jobs"] = median([max(t["rss_jobs"]) for t in ours
                                                if t["jobs"] == kmax])
        s["rss_mb"]["ours_leader_jobs"] = median([t["leader_rss_jobs"] for t in ours
                                                  if t["jobs"] == kmax])
    s["rss_mb"]["ours_jobs_k"] = kmax
    s["flink_tasks_after_job_running_s"] = median(
        [t["failover_s"] - t["job_status_running_s"] for d in fl for t in d["trials"]
         if t["kind"] == "leader"])
    return s


def _ratio(a, b) -> str:
    try:
        if a is None or b is None or b != b or a != a or b == 0:
            return "n/a"
        return f"{a / b:.1f}x"
    except TypeError:
        return "n/a"


def _cell(x: dict | None) -> str:
    if not x or x["median_s"] != x["median_s"]:
        return "n/a"
    if x["max_s"] == 0 and not x["trials_with_jobs_stopped"]:
        return "0 s (no job stopped)"
    note = (f" ({x['trials_with_jobs_stopped']} trials: jobs not RUNNING during the window)"
            if x["trials_with_jobs_stopped"] else "")
    return f"{x['median_s']:.2f} s [{x['min_s']:.2f}-{x['max_s']:.2f}]{note}"


def render(s: dict, meta: dict) -> str:
    L = []
    L.append("# Our JobManager cluster vs Apache Flink 2.3 standby-JobManager HA")
    L.append("")
    L.append(f"Measured {meta['time']} by `bench/vs_flink.py` ({meta['command']}) on "
             f"{meta['host']}: {meta['cpus']} cores, everything on 127.0.0.1. "
             f"Flink: ZooKeeper + 2 JobManagers + 1 TaskManager (16 slots). Ours: 3 peers. "
             f"Medians over the trials, [min-max].")
    L.append("")
    L.append("## Failover (`kill -9`)")
    L.append("")
    L.append("Time from the kill until every job is RUNNING again, median [min-max], and what "
             "was restarted: Flink restarts every job of the cluster on a leader loss (their "
             "tasks ran in the surviving TaskManager); ours moves only the killed peer's jobs "
             "and restarts no other job.")
    L.append("")
    sysnames = ("flink_default", "flink_tuned", "ours_default", "ours_fast")
    labels = ("Flink default", "Flink tuned", "ours default", "ours fast")
    ntr = {n: max([row[n]["trials"] for row in s["failover"].values() if n in row] or [0])
           for n in sysnames}
    L.append("| kill -9 of | jobs | " + " | ".join(f"{lb} ({ntr[n]} trials)"
                                                  for n, lb in zip(sysnames, labels)) + " |")
    L.append("|---|---|---|---|---|---|")

    def cell(name, x, k):
        if not x:
            return "n/a"
        if name.startswith("flink"):
            what = f"{x['restarted_median']:.0f}/{k} jobs restarted"
        else:
            what = (f"{x['moved_median']:.0f} moved, {x['surviving_restarted_total']} other "
                    f"jobs restarted")
        return f"{_cell(x)}; {what}"
    for key, row in s["failover"].items():
        kind, k = key.rsplit("_", 1)
        what = ("leader (Flink: leader JM; ours: Raft leader peer)" if kind == "leader" else
                "non-leader (Flink: standby JM; ours: follower with most jobs)")
        L.append(f"| {what} | {k} | " + " | ".join(cell(n, row.get(n), k) for n in sysnames)
                 + " |")
    L.append("")
    L.append("## REST submission of trivial jobs (closed loop)")
    L.append("")
    L.append("| clients | figure | Flink (default) | ours (default) | ratio ours/Flink |")
    L.append("|---|---|---|---|---|")
    for key, row in s["submission"].items():
        c = key.split("_")[1]
        fl, ou = row.get("flink"), row.get("ours")
        for fig, unit, inv in (("submits_per_s", "submits/s", False),
                               ("completed_per_s", "completed jobs/s", False),
                               ("p50_ms", "submit p50 ms", True),
                               ("p99_ms", "submit p99 ms", True)):
            a = fl and fl[fig]
            b = ou and ou[fig]
            ratio = _ratio(a, b) + " faster" if inv else _ratio(b, a)
            fa = f"{a:.1f}" if fl else "n/a"
            fb = f"{b:.1f}" if ou else "n/a"
            L.append(f"| {c} | {unit} | {fa} | {fb} | {ratio if fl and ou else 'n/a'} |")
        if fl and ou:
            L.append(f"| {c} | runs x jobs, errors | {fl['runs']} x {fl['jobs_per_run']}, "
                     f"{fl['errors']} | {ou['runs']} x {ou['jobs_per_run']}, {ou['errors']} | |")
    L.append("")
    r = s["rss_mb"]
    k = r.get("ours_jobs_k")
    L.append("## Control-plane memory (RSS, MB)")
    L.append("")
    L.append("| process | idle | with " + str(k) + " jobs running |")
    L.append("|---|---|---|")
    f = lambda x: f"{x:.0f}" if isinstance(x, (int, float)) and x == x else "n/a"  # noqa: E731
    L.append(f"| Flink JobManager, leader | {f(r.get('flink_leader_idle'))} | "
             f"{f(r.get('flink_leader_jobs'))} |")
    L.append(f"| Flink JobManager, standby | {f(r.get('flink_standby_idle'))} | "
             f"{f(r.get('flink_standby_jobs'))} |")
    L.append(f"| our peer (largest of 3, without its children) | {f(r.get('ours_peer_idle'))} "
             f"| {f(r.get('ours_peer_jobs'))} |")
    L.append(f"| ratio Flink leader JM / our peer | "
             f"{_ratio(r.get('flink_leader_idle'), r.get('ours_peer_idle'))} | "
             f"{_ratio(r.get('flink_leader_jobs'), r.get('ours_peer_jobs'))} |")
    L.append(f"| (Flink TaskManager, for reference) | | {f(r.get('flink_taskmanager_jobs'))} |")
    L.append("")
    L.append("## Ratios")
    L.append("")
    L.append("| figure | value |")
    L.append("|---|---|")
    for key, row in s["failover"].items():
        kind, kk = key.rsplit("_", 1)
        if kind != "leader":
            continue
        od, of = row.get("ours_default"), row.get("ours_fast")
        fd, ft = row.get("flink_default"), row.get("flink_tuned")
        g = lambda x: x and x["median_s"]  # noqa: E731
        L.append(f"| leader failover speed-up, {kk} jobs: ours default vs Flink default / "
                 f"tuned | {_ratio(g(fd), g(od))} / {_ratio(g(ft), g(od))} |")
        L.append(f"| leader failover speed-up, {kk} jobs: ours fast vs Flink default / tuned "
                 f"| {_ratio(g(fd), g(of))} / {_ratio(g(ft), g(of))} |")
        sf = sum(x["surviving_restarted_total"] for x in (fd, ft) if x)
        nf = sum(x["trials"] for x in (fd, ft) if x)
        so = sum(x["surviving_restarted_total"] for x in (od, of) if x)
        no = sum(x["trials"] for x in (od, of) if x)
        L.append(f"| restarts of surviving jobs, leader kill, {kk} jobs (all trials) | "
                 f"Flink {sf} in {nf} trials ({kk} per trial), ours {so} in {no} trials |")
    for key, row in s["submission"].items():
        fl, ou = row.get("flink"), row.get("ours")
        if fl and ou:
            L.append(f"| submissions/s ratio ours/Flink, {key.split('_')[1]} client(s) | "
                     f"{_ratio(ou['submits_per_s'], fl['submits_per_s'])} |")
    L.append(f"| RSS ratio Flink leader JM / our peer, with {k} jobs | "
             f"{_ratio(r.get('flink_leader_jobs'), r.get('ours_peer_jobs'))} |")
    L.append("")
    L.append("## How it was measured")
    L.append("")
    gap = s.get("flink_tasks_after_job_running_s", float("nan"))
    notes = [
        f"Flink {meta.get('flink_version', '')} from the PyPI wheels; job: "
        "`bench/flink_job/BenchJob.java` (throttled DataGeneratorSource, 4 records/s, into a "
        "DiscardingSink, checkpoints every 5 s; parallelism 1). Profiles: default (heartbeat "
        "10 s / 50 s, ZooKeeper session 60 s; zoo.cfg sets `maxSessionTimeout=60000` so that "
        "the 60 s is granted) and tuned (heartbeat 1 s / 5 s, session 6 s, connection timeout "
        "3 s). One cluster per profile, K = 4 jobs, then 8 more for K = 12; the killed "
        "JobManager is started again (as the new standby) before the next trial.",
        "Flink \"RUNNING again\": the first poll (every 0.1 s) of the surviving JobManager's "
        "`/jobs/overview` in which every job is RUNNING with all its tasks running (Flink's "
        f"own job-RUNNING timestamp, without the tasks, is {gap:.2f} s earlier in the median: "
        "`job_status_running_s` in the JSON). Restarted = tasks started after the kill. "
        f"Standby kill: the jobs are watched for {meta.get('window', 10):.0f} s (a poll every "
        "0.2 s) and must stay RUNNING without a restart.",
        "Ours: a fresh 3-peer cluster per trial (K probe jobs spread by the placement), "
        "settings as `bench/failover.py`; time = the cluster's RUNNING timestamp of the last "
        "moved job minus the kill; \"other jobs restarted\" = jobs not on the killed peer whose "
        "attempt or restart count changed.",
        f"Submission: {meta.get('warmup', 0)} unmeasured jobs first (JIT warm-up), then "
        "closed-loop clients. Flink: `POST /jars/<id>/run`, alternating between both "
        "JobManagers (each compiles its share of the job graphs); ours: `POST /jobs` with "
        "`X-Request-Id` to the 3 peers in turn. Completed jobs/s = FINISHED jobs / (first "
        "submission -> last end-time).",
        "RSS: Flink JobManager JVMs (leader and standby; idle right after start, and with "
        f"the {k} jobs running; median of the two profile runs); ours: the peer process alone "
        "(zygote and job processes excluded), the largest of the 3, idle after start and with "
        f"the jobs running, median over the trials. With {k} jobs the Flink leader holds every "
        "JobMaster, while each of our peers runs about a third of them.",
    ]
    L.extend("* " + n for n in notes)
    L.append("")
    return "\n".join(L)


def chart(s: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.8), layout="constrained")
    names = [("flink_default", "Flink default", "#c0504d"), ("flink_tuned", "Flink tuned",
                                                               "#f79646"),
             ("ours_default", "ours default", "#4f81bd"), ("ours_fast", "ours fast", "#9bbb59")]
    keys = list(s["failover"])
    ax = axes[0]
    w = 0.2
    for n, (name, label, color) in enumerate(names):
        ys = [s["failover"][k].get(name, {}).get("median_s") or 0 for k in keys]
        ys = [y if y == y else 0 for y in ys]
        ax.bar([i + (n - 1.5) * w for i in range(len(keys))], [max(y, 0.01) for y in ys], w,
               label=label, color=color)
        for i, y in enumerate(ys):
            ax.text(i + (n - 1.5) * w, max(y, 0.01) * 1.05,
                    f"{y:.1f}" if y else "0\nnone\nstopped", ha="center", fontsize=6)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([k.replace("non_leader", "non-leader").replace("_", "\n") + " jobs"
                        for k in keys], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("s until every job RUNNING again (log)")
    ax.set_title("kill -9 failover (median)")
    ax.legend(fontsize=8)
    ax = axes[1]
    sub = s["submission"]
    labels, fv, ov = [], [], []
    for key, row in sub.items():
        c = key.split("_")[1]
        for fig_key, nm in (("submits_per_s", "submits/s"), ("completed_per_s", "completed/s")):
            labels.append(f"{nm}\n{c} client(s)")
            fv.append((row.get("flink") or {}).get(fig_key, 0))
            ov.append((row.get("ours") or {}).get(fig_key, 0))
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], fv, 0.4, label="Flink", color="#c0504d")
    ax.bar([i + 0.2 for i in x], ov, 0.4, label="ours", color="#4f81bd")
    for i in x:
        ax.text(i - 0.2, fv[i] * 1.05 + 0.01, f"{fv[i]:.0f}", ha="center", fontsize=7)
        ax.text(i + 0.2, ov[i] * 1.05 + 0.01, f"{ov[i]:.0f}", ha="center", fontsize=7)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_title("REST submission of trivial jobs (median)")
    ax.legend(fontsize=8)
    ax = axes[2]
    r = s["rss_mb"]
    groups = [("Flink JM leader", r.get("flink_leader_idle"), r.get("flink_leader_jobs")),
              ("Flink JM standby", r.get("flink_standby_idle"), r.get("flink_standby_jobs")),
              ("our peer", r.get("ours_peer_idle"), r.get("ours_peer_jobs"))]
    x = range(len(groups))
    idle = [g[1] or 0 for g in groups]
    busy = [g[2] or 0 for g in groups]
    ax.bar([i - 0.2 for i in x], idle, 0.4, label="idle", color="#8faadc")
    ax.bar([i + 0.2 for i in x], busy, 0.4, label=f"{r.get('ours_jobs_k')} jobs running",
           color="#2f5597")
    for i in x:
        ax.text(i - 0.2, idle[i] + 5, f"{idle[i]:.0f}", ha="center", fontsize=8)
        ax.text(i + 0.2, busy[i] + 5, f"{busy[i]:.0f}", ha="center", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels([g[0] for g in groups], fontsize=8)
    ax.set_ylabel("RSS MB")
    ax.set_title("control-plane process memory")
    ax.legend(fontsize=8)
    fig.suptitle("JobManager cluster (3 peers) vs Apache Flink 2.3 ZooKeeper HA (2 JMs), "
                 "127.0.0.1, 2 cores")
    fig.savefig(path, dpi=110)
    plt.close(fig)
