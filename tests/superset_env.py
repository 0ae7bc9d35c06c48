"""Apache Superset's released version in an environment of its own (it pins SQLAlchemy
1.4, the project's environment has 2): what tests/integration/test_sqlalchemy.py drives
through the jm:// dialect as a BI user would. bin/test.sh makes it in .cache/superset
while the fast tests run:

    .venv/bin/python tests/superset_env.py --install .cache/superset

It holds venv/ (the pins of tests/superset-constraints.txt; the test installs the light
client it builds from these sources into it) and superset.db, Superset's metadata database
after `superset db upgrade`, `superset fab create-admin` and `superset init` (25 s of CPU
that each test run would pay again): the test starts Superset on a copy of it. A changed
constraints file makes it again."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONSTRAINTS = os.path.join(ROOT, "tests", "superset-constraints.txt")
CONFIG = os.path.join(ROOT, "tests", "superset_config.py")
STAMP = "constraints.txt"   # the constraints the environment was made from
ADMIN = ("admin", "admin")  # (user, password) in the template database


def env(home: str, db: str) -> dict:
    """The environment Superset's commands and server run with: tests/superset_config.py
    with its metadata database at `db`."""
    return dict(os.environ, SUPERSET_CONFIG_PATH=CONFIG, SUPERSET_HOME=home,
                JM_SUPERSET_DB=db, FLASK_APP="superset", PYTHONPATH="")


def python(target: str) -> str:
    return os.path.join(target, "venv", "bin", "python")


def ready(target: str) -> bool:
    try:
        with open(os.path.join(target, STAMP)) as f, open(CONSTRAINTS) as want:
            return f.read() == want.read() and os.path.exists(os.path.join(target, "superset.db"))
    except OSError:
        return False


def _run(cmd: list[str], **kw) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["failed"]
        raise RuntimeError(f"{' '.join(cmd[:4])}...: {tail[0]}")


def install(target: str) -> int:
    if ready(target):
        return 0
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    try:
        _run([sys.executable, "-m", "venv", os.path.join(target, "venv")])
        _run([python(target), "-m", "pip", "install", "-q", "--no-compile",
              "--prefer-binary", "-r", CONSTRAINTS])
        home = os.path.join(target, "home")
        os.makedirs(home)
        e = env(home, os.path.join(target, "superset.db"))
        superset = os.path.join(target, "venv", "bin", "superset")
        _run([superset, "db", "upgrade"], env=e)
        _run([superset, "fab", "create-admin", "--username", ADMIN[0], "--password", ADMIN[1],
              "--firstname", "BI", "--lastname", "User", "--email", "bi@example.org"], env=e)
        _run([superset, "init"], env=e)
    except (RuntimeError, OSError) as exc:
        print(f"superset: {exc}", file=sys.stderr)
        shutil.rmtree(target, ignore_errors=True)   # (no half-made environment is `ready`)
        return 1
    shutil.copyfile(CONSTRAINTS, os.path.join(target, STAMP))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--install"] and len(sys.argv) == 3:
        sys.exit(install(os.path.abspath(sys.argv[2])))
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)
