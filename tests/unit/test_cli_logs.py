"""jm logs -f on a job that has not run yet waits for its first attempt (a job waiting
for a slot has no log yet: asking for one is a 404 the CLI must not show)."""
import argparse

from jm.client import cli_ops
from jm.client.cli_http import ApiError


class Cluster:
    """The answers of GET /jobs/{id} and /logs as a job is placed, runs and ends."""
    def __init__(self):
        self.job_reads = 0

    def get(self, path):
        if path.startswith("/jobs/j1/logs"):
            if self.job_reads < 3:
                raise ApiError(404, ["job j1 has not run yet; it has no logs"])
            assert "attempt=1" in path, path
            return {"text": "hello\n", "ended": True, "next-offset": 6, "attempt": 1}
        assert path == "/jobs/j1", path
        self.job_reads += 1
        if self.job_reads < 3:
            return {"state": "CREATED", "attempts": []}
        return {"state": "FINISHED", "attempts": [{"attempt": 1, "node": "n1"}]}


def test_follow_waits_for_the_first_attempt(capsys):
    args = argparse.Namespace(jobid="j1", attempt=None, tail=None, json=False, follow=True)
    assert cli_ops.cmd_logs(Cluster(), args) == 0
    assert capsys.readouterr().out == "hello\n"
