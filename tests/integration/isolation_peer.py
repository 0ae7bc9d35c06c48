"""A stand-in peer process for test_job_isolation's process-group test: it runs the real
Executor (zygote), renews a lease of LEASE seconds every 0.2 s as a peer does, starts one
ticking job and prints `<zygote pid> <job pid>`; it runs until stdin closes."""
import asyncio
import os
import sys
import time

from jm.policy.jobs.runparams import RunParams
from jm.runtime.executor import Executor
from tests.helpers import spawned

LEASE = 3.0


async def main(base: str) -> None:
    ex = Executor(os.path.join(base, "log"), preload="none")
    await ex.start()
    ex.set_lease(time.monotonic() + LEASE)
    run = os.path.join(base, "run")
    os.makedirs(run, exist_ok=True)
    jp = await spawned(ex, RunParams(
        job_id="p", attempt=1, node="n1", entry="isolation_jobs:ticks", sql=None,
        args={"path": os.path.join(base, "ticks"), "seconds": 300},
        pyfiles=(os.path.dirname(os.path.abspath(__file__)) + "/",),
        log_path=os.path.join(base, "job.log"),
        result_path=os.path.join(run, "result.json"),
        error_path=os.path.join(run, "error.json"),
        checkpoint_dir=os.path.join(base, "cp")))
    print(ex.zygote_pid, jp.pid, flush=True)
    loop = asyncio.get_running_loop()
    eof = loop.run_in_executor(None, sys.stdin.read)
    while not eof.done():
        ex.set_lease(time.monotonic() + LEASE)
        await asyncio.sleep(0.2)
    await ex.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
