"""The peer's own log rotates when the peer runs as bin/jobmanager.sh starts it (stdout
and stderr appended to <env.log.dir>/jm-<user>-<host>_<rest-port>.log): at most
env.log.max-files rotated files, and the process's stdout follows the current file."""
import os

import pytest

from tests.e2e.procs import ProcessCluster
from tests.helpers import http, poll

pytestmark = pytest.mark.slow
FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "integration") + "/"


def test_peer_log_rotates_under_bin_jobmanager_sh(tmp_path):
    c = ProcessCluster(str(tmp_path), 1, {
        "spark.connect.embedded": False, "jobmanager.executor.preload": "none",
        "jobmanager.log.level": "DEBUG", "env.log.max-size": "16 kb",
        "env.log.max-files": 2, "restart-strategy.type": "none"})
    log_dir = tmp_path / "log"
    try:
        c.start()
        pid = c.peer_pid(0)
        log = next(str(log_dir / n) for n in os.listdir(log_dir) if n.startswith("jm-")
                   and n.endswith(".log"))

        def rotated_twice():  # jobs make the peer log; rotate past max-files
            for _ in range(10):
                s, b = http("POST", c.urls[0] + "/jobs", {"entry": "jobs_fixture:quick",
                                                          "pyfiles": [FIX]})
                assert s == 202, b
            return os.path.exists(log + ".2") and os.path.getsize(log + ".2") > 8 * 1024
        poll(rotated_twice, 120, interval=0.2, what="the peer log rotated twice")
        poll(lambda: http("POST", c.urls[0] + "/jobs", {"entry": "jobs_fixture:quick",
                                                        "pyfiles": [FIX]})[0] == 202
             and os.path.getsize(log) > 0 and os.path.getsize(log + ".1") > 8 * 1024, 60,
             interval=0.2, what="the rotation going on")
        names = sorted(n for n in os.listdir(log_dir) if n.startswith(os.path.basename(log)))
        assert names == [os.path.basename(log) + s for s in ("", ".1", ".2")]
        for n in names:
            assert os.path.getsize(log_dir / n) <= 16 * 1024 + 4096, n
        # stdout and stderr of the process are the current file, not a rotated one
        for fd in (1, 2):
            assert os.readlink(f"/proc/{pid}/fd/{fd}") == log
        assert http("GET", c.urls[0] + "/healthz")[1]["ok"]
    finally:
        c.stop()
