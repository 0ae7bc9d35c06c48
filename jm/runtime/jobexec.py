"""A job process that replaced itself with its environment's interpreter (jm/runtime/
pyenv.py exec_fresh): the fence watch again (a thread does not outlive exec), then the
job, as the zygote's child runs it."""
from __future__ import annotations

import json
import os
import sys


def main() -> int:
    from jm.policy.jobs.runparams import RunParams
    from jm.runtime.confine import watch_fence
    from jm.runtime.pyenv import FENCE_ENV
    with open(sys.argv[1]) as f:
        params = RunParams.from_wire(json.load(f))
    os.unlink(sys.argv[1])
    pids = [int(p) for p in os.environ.pop(FENCE_ENV, "").split(",") if p]
    if pids:
        watch_fence(pids, params.fence_interval)
    from jm.runtime.jobrun import run_job
    return run_job(params)


if __name__ == "__main__":
    code = 1
    try:
        code = main()
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
