"""The Raft listener (raft/transport.py): pysyncobj's TcpServer kept open whatever
accept() says. Out of descriptors or memory it pauses a moment and listens again
(wire.accept_error_action); a listening socket that fails is bound again."""
from __future__ import annotations

import logging
import socket
import time
from typing import Any, Optional

from pysyncobj.poller import POLL_EVENT_TYPE

from raft import wire
from raft.door import HookedServer
from raft.framing import WireConnection, Throttle

log = logging.getLogger("jm.raft.wire")
LISTEN_BACKLOG = 128


class WireServer(HookedServer):
    """pysyncobj's listener, kept open whatever accept() says (wire.accept_error_action)."""

    def __init__(self, *args: Any, frame_limit: int = wire.HANDSHAKE_LIMIT,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frame_limit = frame_limit
        self.paused_until: Optional[float] = None
        self.backoff = 0.0
        self.failed = False  # the listening socket itself failed: bind again
        self._say = Throttle()

    def bind(self) -> None:
        super().bind()
        self.failed = False
        self.listening.listen(LISTEN_BACKLOG)  # pysyncobj listens with 5

    def on_accept(self, descr: int, event: int) -> None:
        if event & POLL_EVENT_TYPE.READ:
            for _ in range(64):  # what is waiting, within reason
                if not self._accept_one():
                    break
        if event & POLL_EVENT_TYPE.ERROR:
            log.warning("the Raft listener failed; binding it again")
            self.unbind()
            self.failed = True

    def _accept_one(self) -> bool:
        lsock = self.listening
        if lsock is None or self.paused_until is not None:
            return False
        try:
            sock, _ = lsock.accept()
        except OSError as exc:
            action = wire.accept_error_action(exc.errno)
            if action == "again":
                self.backoff = 0.0
                return False
            if action == "backoff":
                self.pause(exc)
                return False
            log.debug("Raft accept failed (%s); listening on", exc)
            return True
        self.backoff = 0.0
        try:
            send_size, recv_size = self.buffer_sizes
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_size)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv_size)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            conn = WireConnection(socket=sock, frame_limit=self.frame_limit, member=False,
                                  **self.connection_options())
        except OSError as exc:  # the other side went away already, or no memory
            sock.close()
            log.debug("Raft connection lost while being accepted: %s", exc)
            return True
        self.accepted(conn)
        return True

    def pause(self, exc: OSError) -> None:
        """Out of descriptors or memory: stop watching the listener for a moment (it
        would be readable again at once, and the tick thread would spin), keep it open:
        connections wait in its backlog until `resume`."""
        self.backoff = wire.next_backoff(self.backoff)
        self.paused_until = time.monotonic() + self.backoff
        self.watch(False)
        self._say("accept", logging.WARNING, "Raft listener: accept() failed (%s); it "
                  "listens again in %.2f s", exc, self.backoff)

    def resume(self) -> None:
        if self.paused_until is None or time.monotonic() < self.paused_until:
            return
        self.paused_until = None
        self.watch(True)
