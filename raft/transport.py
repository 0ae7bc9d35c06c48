"""pysyncobj's TCP transport with a guarded door (the decisions are in raft/wire.py).

`WireTransport` is the transport of every member (raft.fsync or not: journal.py's
SyncingTransport extends it). Against pysyncobj's own:
* a frame is read through the restricted unpickler, within raft.max-message-size (before
  a connection has said which member it is, within wire.HANDSHAKE_LIMIT); a refused one
  drops the connection with a log line;
* inbound connections are capped (raft.max-connections), those that never say which
  member they are go after connectionTimeout, and read-only nodes and utility commands
  (which would let anyone read the log or change the membership) are refused;
* the listener survives accept() failing: out of descriptors (EMFILE, ENFILE) or memory
  it pauses a moment and listens again (pysyncobj closes it for good), and a listener
  that fails is bound again.
Log entries and snapshots are unpickled by pysyncobj itself: `install()` (run on import)
gives its syncobj and serializer modules the restricted unpickler too.
"""
from __future__ import annotations

import functools
import logging
import socket
import time
from typing import Any, Optional

from pysyncobj import serializer as pser
from pysyncobj import syncobj as ps
from pysyncobj import tcp_connection as ptc
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import TcpServer
from pysyncobj.transport import TCPTransport

from raft import wire

log = logging.getLogger("jm.raft.wire")
DEFAULT_MAX_MESSAGE = 256 * 1024 * 1024
LISTEN_BACKLOG = 128


class _Throttle:
    """One log line per `every` seconds per key, with the count of those left out."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self._last: dict[str, tuple[float, int]] = {}

    def __call__(self, key: str, level: int, msg: str, *args: Any) -> None:
        now = time.monotonic()
        last, skipped = self._last.get(key, (-1e9, 0))
        if now - last < self.every:
            self._last[key] = (last, skipped + 1)
            return
        self._last[key] = (now, 0)
        if skipped:
            msg += f" ({skipped} more since the last such line)"
        log.log(level, msg, *args)


_say = _Throttle()


def _peer_of(sock: Optional[socket.socket]) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError):
        return "?"


class WireConnection(TcpConnection):
    """pysyncobj's connection, reading frames through raft/wire.py."""

    def __init__(self, *args: Any, frame_limit: int = DEFAULT_MAX_MESSAGE,
                 member: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frame_limit = frame_limit
        self.member = member  # it has said which member it is (or we called it)
        self.opened_at = time.monotonic()
        self.peer = _peer_of(self._TcpConnection__socket)

    def send(self, message: Any) -> None:
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        data = wire.pack(message)
        if self.encryptor:
            data = self.encryptor.encrypt_at_time(data, int(monotonic_time()))
        self._TcpConnection__writeBuffer += wire.HEADER.pack(len(data)) + data
        self._TcpConnection__trySendBuffer()

    def refuse(self, why: str, level: int = logging.WARNING) -> None:
        _say(f"refuse:{why[:30]}", level, "Raft connection from %s dropped: %s", self.peer, why)
        self.disconnect()

    def _TcpConnection__processRead(self) -> bool:
        more = super()._TcpConnection__processRead()
        buf = self._TcpConnection__readBuffer
        if more and len(buf) >= 4:  # a frame too long is refused before it is read
            why = wire.frame_error(wire.HEADER.unpack_from(buf)[0], self.frame_limit,
                                   self.member)
            if why:
                self.refuse(why)
                return False
        return more

    def _TcpConnection__processParseMessage(self) -> Any:
        buf = self._TcpConnection__readBuffer
        if len(buf) < 4:
            return None
        length = wire.HEADER.unpack_from(buf)[0]
        why = wire.frame_error(length, self.frame_limit, self.member)
        if why:
            self.refuse(why)
            return None
        if len(buf) - 4 < length:
            return None
        data = buf[4:4 + length]
        try:
            if self.encryptor:
                stamp = self.encryptor.extract_timestamp(data)
                if stamp < self.recvLastTimestamp:
                    raise wire.WireError("an encrypted frame older than the last one")
                self.recvLastTimestamp = stamp
                data = self.encryptor.decrypt(data)
            message = wire.unpack(data, self.frame_limit)
            if self.recvRandKey:
                key, message = message
                if key != self.recvRandKey:
                    raise wire.WireError("a frame with the wrong session key")
        except wire.WireError as exc:
            self.refuse(str(exc))
            return None
        except Exception as exc:  # a bad token (wrong raft.password), a bad tuple
            self.refuse(f"{type(exc).__name__}: {exc}"[:200] or "an unreadable frame")
            return None
        self._TcpConnection__readBuffer = buf[4 + length:]
        return message


class WireServer(TcpServer):
    """pysyncobj's listener, kept open whatever accept() says (wire.accept_error_action)."""

    def __init__(self, *args: Any, frame_limit: int = wire.HANDSHAKE_LIMIT,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frame_limit = frame_limit
        self.paused_until: Optional[float] = None
        self.backoff = 0.0
        self.failed = False  # the listening socket itself failed: bind again
        self._say = _Throttle()

    def bind(self) -> None:
        super().bind()
        self.failed = False
        self._TcpServer__socket.listen(LISTEN_BACKLOG)  # pysyncobj listens with 5

    def _TcpServer__onNewConnection(self, descr: int, event: int) -> None:
        if event & POLL_EVENT_TYPE.READ:
            for _ in range(64):  # what is waiting, within reason
                if not self._accept_one():
                    break
        if event & POLL_EVENT_TYPE.ERROR:
            log.warning("the Raft listener failed; binding it again")
            self.unbind()
            self.failed = True

    def _accept_one(self) -> bool:
        lsock = self._TcpServer__socket
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
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._TcpServer__sendBufferSize)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._TcpServer__recvBufferSize)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            conn = WireConnection(poller=self._TcpServer__poller, socket=sock,
                                  timeout=self._TcpServer__connectionTimeout,
                                  sendBufferSize=self._TcpServer__sendBufferSize,
                                  recvBufferSize=self._TcpServer__recvBufferSize,
                                  keepalive=self._TcpServer__keepalive,
                                  frame_limit=self.frame_limit, member=False)
        except OSError as exc:  # the other side went away already, or no memory
            sock.close()
            log.debug("Raft connection lost while being accepted: %s", exc)
            return True
        self._TcpServer__onNewConnectionCallback(conn)
        return True

    def pause(self, exc: OSError) -> None:
        """Out of descriptors or memory: stop watching the listener for a moment (it
        would be readable again at once, and the tick thread would spin), keep it open:
        connections wait in its backlog until `resume`."""
        self.backoff = wire.next_backoff(self.backoff)
        self.paused_until = time.monotonic() + self.backoff
        fileno = self._TcpServer__fileno
        if fileno is not None:
            self._TcpServer__poller.unsubscribe(fileno)
        self._say("accept", logging.WARNING, "Raft listener: accept() failed (%s); it "
                  "listens again in %.2f s", exc, self.backoff)

    def resume(self) -> None:
        if self.paused_until is None or time.monotonic() < self.paused_until:
            return
        self.paused_until = None
        fileno = self._TcpServer__fileno
        if fileno is not None:
            self._TcpServer__poller.subscribe(fileno, self._TcpServer__onNewConnection,
                                              POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)


class WireTransport(TCPTransport):
    """pysyncobj's TCP transport with WireConnection/WireServer and the inbound rules."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        conf = syncObj.conf
        self.max_message = getattr(conf, "maxMessageSize", None) or DEFAULT_MAX_MESSAGE
        self.max_connections_setting = getattr(conf, "maxInboundConnections", 0) or 0
        self._inbound: set = set()
        self.readers = 0  # peers of the cluster (non-voting members connect as readers)
        self._say = _Throttle()
        super().__init__(syncObj, selfNode, otherNodes)

    # ---- the listener --------------------------------------------------------------------
    def _createServer(self) -> None:
        conf = self._syncObj.conf
        bind = conf.bindAddress
        own = getattr(self._selfNode, "address")
        if bind is not None:
            host, port = bind.rsplit(":", 1)
        elif own is not None:
            host, port = own.rsplit(":", 1)
            host = "::" if ":" in host else "0.0.0.0"
        else:
            raise RuntimeError("Unable to determine bind address")
        if host != "0.0.0.0":
            host = globalDnsResolver().resolve(host)
        self._server = WireServer(self._syncObj._poller, host, port,
                                  onNewConnection=self._onNewIncomingConnection,
                                  sendBufferSize=conf.sendBufferSize,
                                  recvBufferSize=conf.recvBufferSize,
                                  connectionTimeout=conf.connectionTimeout,
                                  frame_limit=min(wire.HANDSHAKE_LIMIT, self.max_message))

    def _onTick(self) -> None:
        server = self._server
        if isinstance(server, WireServer):
            if server.failed and self._ready:
                self._ready = False  # pysyncobj binds it again (bindRetryTime)
            server.resume()
        super()._onTick()
        self._reap()

    def _reap(self) -> None:
        """Inbound connections that have not said which member they are within
        connectionTimeout are closed (pysyncobj notices an idle one never)."""
        if not self._unknownConnections:
            return
        too_old = time.monotonic() - self._syncObj.conf.connectionTimeout
        for conn in list(self._unknownConnections):
            if getattr(conn, "opened_at", too_old) < too_old:
                self._say("reap", logging.INFO, "Raft connection from %s closed: it did "
                          "not say which member it is", getattr(conn, "peer", "?"))
                conn.disconnect()
                self._unknownConnections.discard(conn)

    # ---- inbound connections -----------------------------------------------------------------
    def cap(self) -> int:
        return wire.max_connections(self.max_connections_setting,
                                    len(self._nodes) + 1 + self.readers)

    def _onNewIncomingConnection(self, conn: Any) -> None:
        self._inbound = {c for c in self._inbound
                         if c.state != CONNECTION_STATE.DISCONNECTED}
        unknown = sorted((c for c in self._inbound if c in self._unknownConnections),
                         key=lambda c: getattr(c, "opened_at", 0.0))
        now = time.monotonic()
        ok, evict = wire.admit([now - getattr(c, "opened_at", now) for c in unknown],
                               len(self._inbound) - len(unknown), self.cap())
        for old in unknown[:evict]:
            self._unknownConnections.discard(old)
            self._inbound.discard(old)
            old.disconnect()
        if not ok:
            self._say("cap", logging.WARNING, "Raft connection from %s refused: %d "
                      "inbound connections already (raft.max-connections)",
                      getattr(conn, "peer", "?"), len(self._inbound))
            conn.disconnect()
            return
        if evict:
            self._say("evict", logging.WARNING, "Raft inbound connections at the limit of "
                      "%d (raft.max-connections): closed %d that had not said which member "
                      "they are", self.cap(), evict)
        self._inbound.add(conn)
        super()._onNewIncomingConnection(conn)

    def _onIncomingMessageReceived(self, conn: Any, message: Any) -> None:
        expects_key = bool(self._syncObj.encryptor) and not conn.sendRandKey
        why = wire.handshake_error(message, expects_key, self._nodeAddrToNode,
                                   {a for a, n in self._nodeAddrToNode.items()
                                    if self._shouldConnect(n)})
        if why:
            self._unknownConnections.discard(conn)
            if isinstance(conn, WireConnection):  # (a member that was just added or
                # removed is unknown to a replica that has not applied the change yet)
                conn.refuse(why, logging.INFO if why.startswith("an unknown member")
                            else logging.WARNING)
            else:
                conn.disconnect()
            return
        node = self._nodeAddrToNode.get(message) if isinstance(message, str) else None
        old = self._connections.get(node) if node is not None else None
        super()._onIncomingMessageReceived(conn, message)
        if conn not in self._unknownConnections and isinstance(conn, WireConnection):
            conn.frame_limit = self.max_message  # a member: its messages may be big
            conn.member = True
        if old is not None and old is not conn and self._connections.get(node) is conn:
            # the member connected again (its old connection is half-open, or this one is
            # an impostor): close the old one, so that if the new one goes, the member
            # notices and connects again rather than sending into a connection nobody reads
            self._inbound.discard(old)
            old.disconnect()

    def _onUtilityMessage(self, conn: Any, message: Any) -> bool:
        conn.disconnect()  # (refused by handshake_error already; never run one)
        return True

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        why = wire.message_error(message)
        if why:
            conn = self._connections.get(node)
            if isinstance(conn, WireConnection):
                conn.refuse(f"{why} from {node}")
            return
        super()._onMessageReceived(node, message)

    def _onDisconnected(self, conn: Any) -> None:
        self._inbound.discard(conn)
        super()._onDisconnected(conn)

    # ---- outbound connections ------------------------------------------------------------
    def send(self, node: Any, message: Any) -> bool:
        """pysyncobj sends on any connected socket; with raft.password a connection this
        member opened is connected before the other side's session key has come back, and
        a message sent then goes without the key: the other side drops the connection (and
        one sent at that moment every time would keep the member out for good). Such a
        message is not sent, as to a member not connected (Raft sends again)."""
        conn = self._connections.get(node)
        if conn is not None and conn.encryptor and not conn.sendRandKey:
            return False
        if type(message) is dict and message.get("type") == "apply_command_response" \
                and "log_idx" in message:  # a forwarded write appended (raft/fanout.py)
            note = getattr(self._syncObj, "note_forwarded", None)
            if note is not None:
                note(node, message["log_idx"])
        return super().send(node, message)

    def addNode(self, node: Any) -> None:
        self._nodes.add(node)
        self._nodeAddrToNode[node.address] = node
        if self._shouldConnect(node):
            conf = self._syncObj.conf
            conn = WireConnection(poller=self._syncObj._poller, timeout=conf.connectionTimeout,
                                  sendBufferSize=conf.sendBufferSize,
                                  recvBufferSize=conf.recvBufferSize,
                                  keepalive=conf.tcp_keepalive, frame_limit=self.max_message)
            conn.encryptor = self._syncObj.encryptor
            conn.setOnConnectedCallback(functools.partial(self._onOutgoingConnected, conn))
            conn.setOnMessageReceivedCallback(functools.partial(self._onMessageReceived, node))
            conn.setOnDisconnectedCallback(functools.partial(self._onDisconnected, conn))
            self._connections[node] = conn

    def _connectIfNecessarySingle(self, node: Any) -> bool:
        try:
            return super()._connectIfNecessarySingle(node)
        except OSError as exc:  # no descriptor for a socket: try again next time
            self._say("connect", logging.WARNING, "Raft connection to %s not opened: %s",
                      node, exc)
            return False


# ---- pysyncobj's own unpickling of log entries and snapshots ------------------------------
class _EntryPickle:
    """Stands in for pysyncobj.pickle in pysyncobj.syncobj: log entries (commands,
    membership changes, a big entry sent in parts) are read with the restricted unpickler."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.dumps = original.dumps
        self.dump = original.dump
        self.to_bytes = original.to_bytes

    def loads(self, data: Any) -> Any:
        return wire.loads(self.original.to_bytes(data), wire.COMMAND_NAMES)

    def load(self, file: Any) -> Any:
        return wire.load(file, wire.COMMAND_NAMES, state_classes=False)


class _SnapshotPickle(_EntryPickle):
    """... and in pysyncobj.serializer: a snapshot (raft.dump, or one a leader sent)."""

    def loads(self, data: Any) -> Any:
        return wire.loads(self.original.to_bytes(data), wire.SNAPSHOT_NAMES, state_classes=True)

    def load(self, file: Any) -> Any:
        return wire.load(file, wire.SNAPSHOT_NAMES, state_classes=True)


def install() -> None:
    """Idempotent. Also pysyncobj's own TcpConnection (if anything made one) reads
    messages with the restricted unpickler."""
    if not isinstance(ps.pickle, _EntryPickle):
        ps.pickle = _EntryPickle(ps.pickle)
    if not isinstance(pser.pickle, _SnapshotPickle):
        pser.pickle = _SnapshotPickle(pser.pickle)
    if not isinstance(ptc.pickle, _EntryPickle):
        wire_only = _EntryPickle(ptc.pickle)
        wire_only.loads = lambda data: wire.loads(wire_only.original.to_bytes(data))
        ptc.pickle = wire_only


install()
