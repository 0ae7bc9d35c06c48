"""The words a job is described in, for every side that needs them without the replicated
state's module (the light client may import only jm.client and jm.policy; raft/ imports
nothing of ours): Flink's job states and the shape of an `entry`.
tests/unit/test_vocab.py holds them equal to raft/records.py."""
from __future__ import annotations

import re

TERMINAL = frozenset({"FINISHED", "FAILED", "CANCELED"})   # the states a job ends in
JOB_STATES = ("CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "CANCELLING",
              "CANCELED", "FAILED", "FINISHED")
# package.module:function (a job's entry point)
ENTRY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
