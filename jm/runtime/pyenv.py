"""A job process in its own Python environment (its spec's `requirements`, built by the
peer: jm/cluster/jobs/envs.py).

The job process is forked from the zygote, which imported pyspark, pandas, pyarrow and
their dependencies before it forked. `activate` puts the environment's site-packages
first on the path; a module the zygote imported already would still be the peer's
version, so when the environment has its own copy of one (`shadowed`), the process
replaces itself with a fresh interpreter of the environment (`exec_fresh`, pid, user,
limits, cgroup, log and parent-death signal kept; jm/runtime/jobexec.py runs the job
there), which imports the environment's first.
"""
from __future__ import annotations

import importlib
import json
import os
import site
import sys

from jm.policy.jobs.runparams import RunParams

PEER_PTH = "_jm_peer.pth"  # the environment's line to the peer's site-packages
PARAMS_FILE = "exec-params.json"  # in its run folder: its RunParams for the new interpreter
FENCE_ENV = "JM_FENCE_PIDS"


def provided(site_dir: str) -> set[str]:
    """The top-level modules the environment has its own copy of."""
    out = set()
    for name in os.listdir(site_dir):
        if name.startswith(("_", ".")) or name.endswith((".dist-info", ".egg-info", ".pth")):
            continue
        path = os.path.join(site_dir, name)
        if os.path.isdir(path):
            out.add(name)
        elif name.endswith((".py", ".so", ".pyd")):
            out.add(name.split(".", 1)[0])
    return out


def shadowed(site_dir: str) -> list[str]:
    """The modules imported already (the zygote's) that the environment has its own of."""
    return sorted(provided(site_dir) & {m.split(".", 1)[0] for m in sys.modules})


def activate(site_dir: str) -> list[str]:
    """The environment first on sys.path (its .pth files read, not the one that adds the
    peer's site-packages: they are on the path); the modules it would replace that were
    imported already."""
    before = list(sys.path)
    known = {os.path.normcase(p) for p in before}
    sys.path.insert(0, site_dir)
    for name in sorted(os.listdir(site_dir)):
        if name.endswith(".pth") and name != PEER_PTH:
            site.addpackage(site_dir, name, known)
    added = [p for p in sys.path if p not in before and p != site_dir]
    sys.path[:] = [site_dir, *added, *before]
    importlib.invalidate_caches()
    return shadowed(site_dir)


def exec_fresh(params: RunParams, fence_pids: list[int]) -> None:
    """Become a fresh interpreter of the job's environment running it (never returns).
    Its RunParams go in a file of its run folder (an environment variable holds at most
    128 KB: a job's args may be larger)."""
    path = os.path.join(os.path.dirname(params.result_path), PARAMS_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(params.to_wire(), f)
    os.environ[FENCE_ENV] = ",".join(str(p) for p in fence_pids)
    sys.stdout.flush()
    sys.stderr.flush()
    python = params.python_exec or sys.executable
    os.execv(python, [python, "-m", "jm.runtime.jobexec", path])
