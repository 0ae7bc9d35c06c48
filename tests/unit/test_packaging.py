"""The project's packages: the jm-client distribution built by hatchling from the same
sources (clients/jm-client) at the project's version, the runtime dependencies' floors,
and the constraints file the image is built with."""
from __future__ import annotations

import os
import re
import tomllib

from packaging.requirements import Requirement

from tests.helpers import ROOT


def _toml(*path: str) -> dict:
    with open(os.path.join(ROOT, *path), "rb") as f:
        return tomllib.load(f)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_client_is_built_by_hatchling_at_the_projects_version():
    server, client = _toml("pyproject.toml"), _toml("clients", "jm-client", "pyproject.toml")
    assert client["build-system"]["build-backend"] == "hatchling.build"
    assert client["project"]["version"] == server["project"]["version"]
    # (the standard library only, and shell completion: the server has the same one)
    assert client["project"]["dependencies"] == ["argcomplete>=3.1"]
    assert "argcomplete>=3.1" in server["project"]["dependencies"]
    assert client["project"]["scripts"] == {"jm": "jm.client.cli:main"}
    for group in ("sqlalchemy.dialects", "superset.db_engine_specs"):
        assert client["project"]["entry-points"][group] == \
            server["project"]["entry-points"][group]
    assert client["project"]["optional-dependencies"]["sqlalchemy"] == \
        server["project"]["optional-dependencies"]["sqlalchemy"]


def test_runtime_dependencies_have_the_floors_the_code_needs():
    deps = {_norm(Requirement(r).name): Requirement(r)
            for r in _toml("pyproject.toml")["project"]["dependencies"]}
    assert not deps["aiohttp"].specifier.contains("3.13.9")  # web.RequestKey
    assert not deps["aiohttp"].specifier.contains("4.0.0")
    assert "psutil" not in deps  # (tests and benchmarks only)
    extras = _toml("pyproject.toml")["project"]["optional-dependencies"]
    for extra in ("test", "bench"):
        assert any(Requirement(r).name == "psutil" for r in extras[extra]), extra


def test_the_image_installs_with_constraints_that_pin_every_runtime_dependency():
    with open(os.path.join(ROOT, "deploy", "constraints.txt")) as f:
        pins = {}
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, version = line.partition("==")
                pins[_norm(name)] = version
    for raw in _toml("pyproject.toml")["project"]["dependencies"]:
        req = Requirement(raw)
        name = _norm(req.name)
        assert name in pins, f"{name} is not in deploy/constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    docker = open(os.path.join(ROOT, "deploy", "Dockerfile")).read()
    assert "-c deploy/constraints.txt" in docker
