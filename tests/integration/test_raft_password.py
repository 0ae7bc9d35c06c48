"""raft.password through real pysyncobj members on loopback (raft/transport.py): a
connection a member opens is connected before the other side's session key has come back;
a message Raft sends in that moment (a pre-vote whose timer fires then, a tick's held
answers sent after a slow sync) must not leave without the key, or the other side drops
the connection, and a member that sends at that moment every time never gets back in."""
import asyncio
import logging

import pytest

from raft.prevote import PRE_VOTE
from raft.transport import WireTransport
from tests.helpers import apoll
from tests.integration.test_raft_journal import _hosts


@pytest.mark.parametrize("fsync", [True, False], ids=["fsync", "no-fsync"])
async def test_nothing_is_sent_before_the_session_keys_are_exchanged(
        tmp_path, monkeypatch, caplog, fsync):
    caplog.set_level(logging.INFO, logger="jm.raft.wire")
    real_connected, real_tick = WireTransport._onOutgoingConnected, WireTransport._onTick
    pre_vote = {"type": PRE_VOTE, "term": 1, "last_log_term": 0, "last_log_index": 0}
    early, pending = [], set()

    def connected(self, conn):
        real_connected(self, conn)  # this member's key is on its way, the other's is not
        node = self._connToNode(conn)  # back: a message now (held for the tick's sync) ...
        early.append(self.send(node, pre_vote))
        pending.add((self, node))

    def tick(self):  # ... or at this member's next tick, with the socket connected
        for transport, node in list(pending):
            if transport is self:
                pending.discard((transport, node))
                self.send(node, pre_vote)
        real_tick(self)
    monkeypatch.setattr(WireTransport, "_onOutgoingConnected", connected)
    monkeypatch.setattr(WireTransport, "_onTick", tick)
    # one connection, opened by one member, every time
    hosts = _hosts(tmp_path, 2, fsync, password="s3cret")
    try:
        await apoll(lambda: len({h.leader() for h in hosts}) == 1 and hosts[0].leader(),
                    30, what="a leader known to both members")
        assert early  # (the hook ran: the connection was opened)
        dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
        assert not dropped, dropped
    finally:
        for h in hosts:
            await asyncio.to_thread(h.destroy)
