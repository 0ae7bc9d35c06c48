"""The peer's side of the process of one Livy `pyspark` interactive session
(jm/runtime/livyrepl.py): starts it (through jm.runtime.pdeathsig, so it dies with the
peer), runs statements' code in it and interrupts them. If the process dies, every request
in flight fails with WorkerLost; the next request starts a new process, whose namespace is
empty (`generation` tells the caller so: the Spark session's state is the server's, but
the Python variables are gone)."""
from __future__ import annotations

import logging
from typing import Callable, Optional

from jm.runtime import livyproto as P
from jm.runtime.sqlclient import ChildProcess, StatementError, WorkerLost

__all__ = ["LivyProcess", "StatementError", "WorkerLost", "CodeResult"]

CodeResult = P.CodeResult
log = logging.getLogger("jm.livy.repl")


class LivyProcess(ChildProcess):
    what = "Livy session process"
    log = log
    proto = P.CODEC

    def __init__(self, remote: str, session_id: str, log_path: str, nice: int = 0,
                 on_start: Callable[[int], None] = lambda pid: None, env_pass: tuple = (),
                 env_add: Optional[dict] = None, pyfiles: tuple = ()) -> None:
        super().__init__(log_path, nice, on_start, env_pass, env_add)
        self.remote = remote          # the Spark Connect URL (its token: in env_add)
        self.session_id = session_id  # the Spark Connect session the code's `spark` uses
        self.pyfiles = pyfiles        # the session's Python modules (local paths)

    def command(self) -> list:
        return ["jm.runtime.livyrepl", self.remote, self.session_id, *self.pyfiles]

    async def start(self) -> None:
        """Start the process now (else the first request does)."""
        await self.ensure()

    async def run(self, statement: int, code: str,
                  timeout: Optional[float] = None) -> CodeResult:
        """Run statement `statement`'s code (after the ones sent before it); its result,
        an error of the user's code included. WorkerLost if the process died."""
        value = await self.call(P.RunCode(int(statement), code), timeout)
        return CodeResult.from_value(value)

    async def interrupt(self, statement: int, timeout: Optional[float] = 10.0) -> bool:
        """Cancel statement `statement` if it runs or waits to run (its result then says
        KeyboardInterrupt); False if it is not there. False too without a process."""
        if not self.alive:
            return False
        return bool(await self.call(P.Interrupt(int(statement)), timeout))

