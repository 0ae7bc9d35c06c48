"""The light client distribution, `jm-client`: the `jm` CLI, its shell completion and the
Python client (`jm.client.dbapi`) without the server's dependencies (no pyspark, no
aiohttp: the client is the standard library only, which tests/unit/test_import_rules.py
checks). Built from this tree's own files, so it can never differ from the full package:

    bin/build-client.sh [OUT_DIR]      # -> OUT_DIR/jm_client-<version>-py3-none-any.whl
    pip install OUT_DIR/jm_client-*.whl
"""
from __future__ import annotations

import base64
import glob
import hashlib
import os
import re
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# what the client imports (the closure test_import_rules computes), plus package markers
# and the SQLAlchemy dialect (loaded by SQLAlchemy's entry point only, where it is installed)
FILES = ["jm/__init__.py", "jm/client/*.py", "jm/client/sqla/*.py", "jm/policy/__init__.py",
         "jm/policy/jobs/__init__.py", "jm/policy/sql/__init__.py",
         "jm/policy/sql/sqlstmt.py", "jm/policy/jobs/fsuri.py", "jm/policy/jobs/vocab.py",
         "jm/policy/jobs/reqfile.py", "jm/policy/jobs/submitopts.py",
         "jm/policy/jobs/usertrace.py", "jm/policy/sql/sparkerror.py"]


def version() -> str:
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    return m.group(1) if m else "0"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(out_dir: str) -> str:
    """Write the wheel (a zip with the modules and their dist-info, PEP 427) into out_dir;
    return its path. No build tool, no network: the same bytes every time."""
    os.makedirs(out_dir, exist_ok=True)
    ver = version()
    dist_info = f"jm_client-{ver}.dist-info"
    files: list[tuple[str, bytes]] = []
    for pattern in FILES:
        for src in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(src, "rb") as f:
                files.append((os.path.relpath(src, ROOT).replace(os.sep, "/"), f.read()))
    if not any(name == "jm/client/cli.py" for name, _ in files):
        raise RuntimeError(f"jm/client/cli.py not found under {ROOT}")
    meta = (f"Metadata-Version: 2.1\nName: jm-client\nVersion: {ver}\n"
            "Summary: The jm CLI and Python client of a JobManager cluster (no server parts)\n"
            "Requires-Python: >=3.10\n").encode()
    wheel = ("Wheel-Version: 1.0\nGenerator: jm.local.clientdist\nRoot-Is-Purelib: true\n"
             "Tag: py3-none-any\n").encode()
    entry = (b"[console_scripts]\njm = jm.client.cli:main\n\n"
             b"[sqlalchemy.dialects]\njm = jm.client.sqla:JmDialect\n")
    files += [(f"{dist_info}/METADATA", meta), (f"{dist_info}/WHEEL", wheel),
              (f"{dist_info}/entry_points.txt", entry),
              (f"{dist_info}/top_level.txt", b"jm\n")]
    record = "\n".join(_record_line(n, d) for n, d in files) + f"\n{dist_info}/RECORD,,\n"
    path = os.path.join(out_dir, f"jm_client-{ver}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files + [(f"{dist_info}/RECORD", record.encode())]:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, data, zipfile.ZIP_DEFLATED)
    return path


def main(argv: list[str]) -> int:
    out = argv[0] if argv else os.path.join(ROOT, "dist")
    try:
        print(build(out))
    except RuntimeError as exc:
        print(f"build-client: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
