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
Framing is in raft/framing.py (WireConnection), the listener in raft/listener.py
(WireServer), that unpickling in raft/unpickling.py; the inbound rules are here.
"""
from __future__ import annotations

import functools
import logging
import time
from typing import Any

from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.tcp_connection import CONNECTION_STATE
from pysyncobj.transport import TCPTransport

from raft import wire
from raft.framing import DEFAULT_MAX_MESSAGE, WireConnection, Throttle
from raft.listener import WireServer
from raft.unpickling import install  # noqa: F401  (installed on import, as before)

log = logging.getLogger("jm.raft.wire")


class WireTransport(TCPTransport):
    """pysyncobj's TCP transport with WireConnection/WireServer and the inbound rules."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        conf = syncObj.conf
        self.max_message = getattr(conf, "maxMessageSize", None) or DEFAULT_MAX_MESSAGE
        self.max_connections_setting = getattr(conf, "maxInboundConnections", 0) or 0
        self._inbound: set = set()
        self.readers = 0  # peers of the cluster (non-voting members connect as readers)
        self._say = Throttle()
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

