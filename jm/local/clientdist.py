"""What the light client distribution, `jm-client`, is made of: the `jm` CLI, its shell
completion and the Python client (`jm.client.Jobs`, `jm.client.dbapi`, the `jm://`
dialect) without the server's dependencies (no pyspark, no aiohttp: the client is the
standard library only, which tests/unit/test_import_rules.py checks). Hatchling builds it
from these files of this tree (clients/jm-client/: its pyproject.toml and build hook), so
it can never differ from the full package:

    bin/build-client.sh [OUT_DIR]      # python -m build --wheel clients/jm-client
    pip install OUT_DIR/jm_client-*.whl
"""
from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# what the client imports (the closure test_import_rules computes), plus package markers
# and the SQLAlchemy dialect (loaded by SQLAlchemy's entry point only, where it is installed)
FILES = ["jm/__init__.py", "jm/client/*.py", "jm/client/sqla/*.py", "jm/policy/__init__.py",
         "jm/policy/jobs/__init__.py", "jm/policy/sql/__init__.py",
         "jm/policy/sql/sqlstmt.py", "jm/policy/jobs/fsuri.py", "jm/policy/jobs/vocab.py",
         "jm/policy/jobs/reqfile.py", "jm/policy/jobs/submitopts.py",
         "jm/policy/jobs/usertrace.py", "jm/policy/sql/sparkerror.py",
         "jm/policy/sql/opid.py"]

