"""The zygote's protocol through a real zygote: a frame it cannot take gets an `Error`
answer (logged by the peer) and the zygote carries on running jobs."""
import asyncio
import logging
import struct

import msgpack

from jm.runtime.executor import Executor, ProcessExit
from tests.helpers import apoll, spawned
from tests.integration.test_executor import _params


async def test_bad_frames_get_an_error_answer_and_jobs_still_run(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="jm.runtime.executor")
    ex = Executor(str(tmp_path / "log"), preload="none")
    await ex.start()
    try:
        old = ex.zygote_pid
        wire = dict(_params(tmp_path, "x", "jobs_fixture:quick").to_wire(), cwd="/")
        for body in (msgpack.packb([0, "Nope", {}]), msgpack.packb([0, "Spawn", {"key": "k"}]),
                     b"\xc1", msgpack.packb([0, "Spawn", {"key": "k2", "params": wire}]),
                     msgpack.packb([0, "Spawn", {"key": "k3", "params": {"job_id": "y"}}])):
            ex.proc.stdin.write(struct.pack(">I", len(body)) + body)
        await apoll(lambda: sum("refused a message" in r.getMessage()
                                for r in caplog.records) == 5, 10, what="five Error answers")
        text = " ".join(r.getMessage() for r in caplog.records)
        assert "unknown message type 'Nope'" in text and "bad fields for Spawn" in text
        assert "unknown run params: cwd" in text and "missing run params: attempt" in text
        assert not (tmp_path / "x.log").exists()  # nothing was run for a bad Spawn
        jp = await spawned(ex, _params(tmp_path, "a", "jobs_fixture:quick"))
        assert await asyncio.wait_for(jp.exited, 30) == ProcessExit(0)
        assert ex.zygote_pid == old  # the same zygote: it did not crash
    finally:
        await ex.close()
