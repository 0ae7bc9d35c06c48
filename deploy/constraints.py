"""Write deploy/constraints.txt: the exact versions of every package a peer's install
pulls in (the project's runtime dependencies and theirs), read from the environment this
runs in, so that an image built later installs the same ones (the Dockerfile's `pip
install -c deploy/constraints.txt .`).

    .venv/bin/python deploy/constraints.py        # after an upgrade was tested

tests/unit/test_packaging.py checks that every runtime dependency of pyproject.toml is
pinned here within its range."""
from __future__ import annotations

import os
import re
import sys
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "constraints.txt")


def _name(req: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(req).name).lower()


def closure(roots: list[str]) -> dict[str, str]:
    """name -> installed version of `roots` and everything they require (with their
    extras), as installed here."""
    env = default_environment()
    seen: dict[str, str] = {}
    todo = [(Requirement(r), "") for r in roots]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate(dict(env, extra=extra)):
            continue
        name = _name(str(req))
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"constraints: {req.name} is not installed here")
        for wanted in ("", *req.extras):
            key = f"{name}[{wanted}]"
            if key in seen:
                continue
            seen[key] = dist.version
            todo += [(Requirement(r), wanted) for r in dist.requires or ()]
    return {k.split("[")[0]: v for k, v in seen.items()}


def main() -> int:
    import tomllib
    with open(os.path.join(os.path.dirname(HERE), "pyproject.toml"), "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    pins = closure(deps)
    with open(OUT, "w") as f:
        f.write("# The versions a peer's install was tested with (deploy/constraints.py "
                "writes it;\n# the Dockerfile installs with -c deploy/constraints.txt).\n")
        for name in sorted(pins):
            f.write(f"{name}=={pins[name]}\n")
    print(f"wrote {OUT}: {len(pins)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
