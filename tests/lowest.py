"""The lowest versions pyproject.toml allows of the project's runtime dependencies: what a
user's pip may pick where something else holds a package back. bin/test.sh installs them
into .cache/lowest (beside the environment's newer ones: first on PYTHONPATH, they win),
and tests/integration/test_lowest_versions.py runs the tests that use each of them with
these.

    .venv/bin/python tests/lowest.py              # the pins, one per line
    .venv/bin/python tests/lowest.py --install .cache/lowest

A dependency pinned exactly (pyspark, pysyncobj) is the same in both; one with no floor
(pandas<3) has no lowest to try."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from packaging.requirements import Requirement

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAMP = "requirements.txt"   # what an install holds (a changed floor installs again)


def floors() -> list[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    out = []
    for raw in deps:
        req = Requirement(raw)
        low = [s.version for s in req.specifier if s.operator == ">="]
        if low and not any(s.operator == "==" for s in req.specifier):
            out.append(f"{req.name}=={low[0]}")
    return out


def install(target: str) -> int:
    pins = floors()
    stamp = os.path.join(target, STAMP)
    try:
        with open(stamp) as f:
            if f.read().split() == pins:
                return 0
    except OSError:
        pass
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
           "--only-binary", ":all:", "--upgrade", "--target", target, *pins]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"lowest: {r.stderr.strip().splitlines()[-1] if r.stderr else 'pip failed'}",
              file=sys.stderr)
        return 1
    with open(stamp, "w") as f:
        f.write("\n".join(pins) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--install"] and len(sys.argv) == 3:
        sys.exit(install(sys.argv[2]))
    print("\n".join(floors()))
