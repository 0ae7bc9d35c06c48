"""Medians over several runs of bench/vs_flink.py, against the issue's targets.

    .venv/bin/python bench/vs_flink_runs.py bench/results/vs_flink-run1.json \\
        bench/results/vs_flink-run2.json bench/results/vs_flink-run3.json

Each run measures both systems one after the other on the same machine, so every ratio is
taken within a run first; the table then gives each run's figure and the median over the
runs. Writes bench/results/vs_flink-runs.md (or --out) and prints it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from statistics import median

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fail(d: dict, case: str, system: str) -> float | None:
    row = d["summary"]["failover"].get(case, {}).get(system)
    return row["median_s"] if row else None


def _div(a, b):
    return a / b if a is not None and b else None


def figures(d: dict) -> list[tuple[str, float | None, str, float | None]]:
    """(label, value, unit, target) for one run; a ratio of None = not measured."""
    out = []
    for k in d["meta"]["ks"]:
        case = f"leader_{k}"
        fd, ft = _fail(d, case, "flink_default"), _fail(d, case, "flink_tuned")
        od, of = _fail(d, case, "ours_default"), _fail(d, case, "ours_fast")
        out += [(f"leader kill, {k} jobs: Flink default, s", fd, "s", None),
                (f"leader kill, {k} jobs: Flink tuned, s", ft, "s", None),
                (f"leader kill, {k} jobs: ours default, s", od, "s", None),
                (f"leader kill, {k} jobs: ours fast, s", of, "s", None),
                (f"leader kill, {k} jobs: speed-up ours fast vs Flink tuned", _div(ft, of),
                 "x", 5.0),
                (f"leader kill, {k} jobs: speed-up ours fast vs Flink default", _div(fd, of),
                 "x", 30.0),
                (f"leader kill, {k} jobs: speed-up ours default vs Flink tuned", _div(ft, od),
                 "x", None),
                (f"leader kill, {k} jobs: speed-up ours default vs Flink default",
                 _div(fd, od), "x", None)]
        fo = d["summary"]["failover"]
        others = sum(fo.get(c, {}).get(s, {}).get("surviving_restarted_total", 0)
                     for c in (case, f"non_leader_{k}") for s in ("ours_default", "ours_fast"))
        out.append((f"leader and follower kills, {k} jobs: jobs on surviving peers restarted "
                    f"(ours, all trials)", float(others), "", 0.0))
    for n in (1, 8):
        sub = d["summary"]["submission"].get(f"clients_{n}", {})
        f, o = sub.get("flink", {}), sub.get("ours", {})
        out += [(f"submits/s, {n} client(s): Flink", f.get("submits_per_s"), "/s", None),
                (f"submits/s, {n} client(s): ours", o.get("submits_per_s"), "/s", None),
                (f"submits/s ratio ours/Flink, {n} client(s)",
                 _div(o.get("submits_per_s"), f.get("submits_per_s")), "x", 20.0)]
    rss = d["summary"]["rss_mb"]
    out += [("RSS Flink leader JobManager with jobs, MB", rss.get("flink_leader_jobs"), "MB", None),
            ("RSS our peer with jobs, MB", rss.get("ours_peer_jobs"), "MB", None),
            ("RSS ratio Flink leader JM / our peer", _div(rss.get("flink_leader_jobs"),
                                                          rss.get("ours_peer_jobs")), "x", 3.0)]
    return out


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "x":
        return f"{v:.1f}x"
    if unit == "":
        return f"{v:.0f}"
    return f"{v:.2f}" if v < 100 else f"{v:.0f}"


def render(runs: list[dict], paths: list[str]) -> str:
    per_run = [figures(d) for d in runs]
    labels = [f[0] for f in per_run[0]]
    head = " | ".join(f"run {i + 1}" for i in range(len(runs)))
    lines = ["# Our cluster vs Apache Flink: medians over runs of bench/vs_flink.py", "",
             "Runs: " + ", ".join(f"`{os.path.relpath(p, ROOT)}` ({d['meta']['time']}, "
                                  f"{d['meta']['duration_s'] / 60:.0f} min)"
                                  for p, d in zip(paths, runs)) + ".", "",
             "Every ratio is taken within one run (both systems measured one after the "
             "other on the same machine); the median is over the runs. Failover figures are "
             "each run's median over its trials.", "",
             f"| figure | {head} | median | target | met |",
             "|---|" + "---|" * len(runs) + "---|---|---|"]
    for i, label in enumerate(labels):
        vals = [r[i][1] if i < len(r) and r[i][0] == label else None for r in per_run]
        unit, target = per_run[0][i][2], per_run[0][i][3]
        got = [v for v in vals if v is not None]
        med = median(got) if got else None
        if target is None or med is None:
            met = ""
        elif target == 0.0:
            met = "yes" if med == 0 and max(got) == 0 else "no"
        else:
            met = "yes" if med >= target else "no"
        tgt = "" if target is None else ("0" if target == 0.0 else f">= {target:g}x")
        lines.append(f"| {label} | " + " | ".join(_fmt(v, unit) for v in vals)
                     + f" | **{_fmt(med, unit)}** | {tgt} | {met} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="vs_flink JSON files")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "vs_flink-runs.md"))
    args = ap.parse_args()
    try:
        runs = [json.load(open(p)) for p in args.runs]
    except (OSError, ValueError) as exc:
        print(f"vs_flink_runs: cannot read a run: {exc}", file=sys.stderr)
        return 2
    text = render(runs, args.runs)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
