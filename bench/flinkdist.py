"""Apache Flink's distribution from PyPI, shared by bench/vs_flink.py and the Flink
compatibility tests (tests/e2e/test_flink_cli.py).

`pip download --no-deps apache-flink==<v> apache-flink-libraries==<v>` into
bench/.flink/wheels, both wheels unzipped into bench/.flink/home: pyflink/bin (the
`flink` CLI, jobmanager.sh ...), pyflink/lib (the jars) and pyflink/conf form a Flink home.
bench/.flink/ is git-ignored. Standard library only.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLINK_VERSION = "2.3.0"
FLINK_DIR = os.path.join(ROOT, "bench", ".flink")
WHEELS = os.path.join(FLINK_DIR, "wheels")
HOME = os.path.join(FLINK_DIR, "home", "pyflink")
CLI = os.path.join(HOME, "bin", "flink")
SCRIPTS = ("jobmanager.sh", "taskmanager.sh", "flink", "config.sh", "flink-console.sh",
           "bash-java-utils.sh", "config-parser-utils.sh", "find-flink-home.sh")


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def _prefixes(version: str) -> list[str]:
    return [f"apache_flink-{version}-", f"apache_flink_libraries-{version}-"]


def have_wheels(version: str = FLINK_VERSION) -> bool:
    have = os.listdir(WHEELS) if os.path.isdir(WHEELS) else []
    return all(any(f.startswith(w) and f.endswith(".whl") for f in have)
               for w in _prefixes(version))


def have_home() -> bool:
    return os.path.exists(os.path.join(HOME, "bin", "jobmanager.sh")) and \
        os.path.isdir(os.path.join(HOME, "lib"))


def ensure_home(version: str = FLINK_VERSION, log=_log, quiet: bool = True) -> str:
    """Download (once) and unzip (once) Flink's wheels; the Flink home's path.
    Raises subprocess.CalledProcessError when pip cannot download them."""
    if not have_wheels(version):
        log("downloading the Apache Flink wheels from PyPI")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        *(["-q"] if quiet else []),
                        f"apache-flink=={version}", f"apache-flink-libraries=={version}",
                        "-d", WHEELS], check=True)
    if not have_home():
        log("unzipping the wheels into bench/.flink/home")
        for f in sorted(os.listdir(WHEELS)):
            if any(f.startswith(w) for w in _prefixes(version)) and f.endswith(".whl"):
                with zipfile.ZipFile(os.path.join(WHEELS, f)) as z:
                    for info in z.infolist():
                        path = z.extract(info, os.path.dirname(HOME))
                        mode = info.external_attr >> 16
                        if mode and not info.is_dir():
                            os.chmod(path, mode & 0o777)
    for script in SCRIPTS:
        p = os.path.join(HOME, "bin", script)
        if os.path.exists(p):
            os.chmod(p, 0o755)
    return HOME


if __name__ == "__main__":
    print(ensure_home(quiet=False))
