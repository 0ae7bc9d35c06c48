"""Hatchling's build hook of jm-client: the client's modules, from the project's tree
(jm/local/clientdist.py FILES: what the client imports, which tests/unit/test_import_rules
.py checks), into the wheel at their own paths."""
from __future__ import annotations

import glob
import os
import sys

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        sys.path.insert(0, ROOT)
        try:
            from jm.local.clientdist import FILES
        finally:
            sys.path.remove(ROOT)
        found = 0
        for pattern in FILES:
            for src in sorted(glob.glob(os.path.join(ROOT, pattern))):
                build_data["force_include"][src] = os.path.relpath(src, ROOT)
                found += 1
        if not found or not os.path.exists(os.path.join(ROOT, "jm", "client", "cli.py")):
            raise RuntimeError(f"the client's sources are not under {ROOT}")
