"""The Raft membership as a member sees it and changes to it (pysyncobj's dynamic
membership; the leader makes the changes), leadership transfer, and leaving elections:
`Members`, a role of raft/node.py's RaftHost (`host.membership`), reading the node the
member runs now (raft/current.py)."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Optional

from pysyncobj import FAIL_REASON

from raft.current import CurrentNode
from raft.outcomes import FAIL_NAMES, MembershipRefused, RaftUnavailable, settle

log = logging.getLogger("jm.raft")


class Members:
    """Members, their replication and connection status, membership changes, and
    leadership transfer. `leader()` and `is_leader()` are the host's (node ids)."""

    def __init__(self, current: CurrentNode, loop: asyncio.AbstractEventLoop, self_addr: str,
                 addr_to_node: dict[str, str], max_timeout: float,
                 leader: Callable[[], Optional[str]], is_leader: Callable[[], bool]) -> None:
        self.current, self.loop, self.self_addr = current, loop, self_addr
        self.addr_to_node, self.max_timeout = addr_to_node, max_timeout
        self.leader, self.is_leader = leader, is_leader

    @property
    def syncobj(self) -> Any:
        return self.current.syncobj

    # ---- membership (pysyncobj's dynamic membership; the leader makes the changes) -----
    def members(self) -> list[str]:
        """The Raft members as this replica knows them (node ids, this one included)."""
        others = self.syncobj.otherNodes  # a copy, made on the tick thread's data
        own = {self.self_addr} if self.current.is_voter else set()
        return sorted(own | {getattr(n, "address", str(n)) for n in others})

    def match_index(self, node: str) -> Optional[int]:
        """On the leader: the last log index known to be on `node` (None: not known)."""
        for _ in range(3):  # getStatus iterates dicts the tick thread may be changing
            try:
                return self.syncobj.getStatus().get(f"match_idx_server_{node}")
            except RuntimeError:
                continue
        return None

    def connected(self, node: str) -> bool:
        """On any member: whether its Raft link to `node` is up now."""
        for _ in range(3):  # getStatus iterates dicts the tick thread may be changing
            try:
                return self.syncobj.getStatus().get(f"partner_node_status_server_{node}") == 2
            except RuntimeError:
                continue
        return False

    def commit_index(self) -> int:
        return self.syncobj.raftCommitIndex

    def caught_up(self) -> bool:
        """This replica has applied every entry it knows to be committed (by the leader's
        word too): a member that joins anew has replayed the log up to now."""
        try:  # getStatus iterates dicts the tick thread may be changing
            status = self.syncobj.getStatus()
        except RuntimeError:
            return False
        known = max(status.get("leader_commit_idx") or 0, status.get("commit_idx") or 0)
        return (status.get("last_applied") or 0) >= known

    async def change_member(self, add: bool, node: str, timeout: float) -> None:
        """Add `node` to (or remove it from) the Raft membership; returns once the change
        is committed. MembershipRefused if the leader refused it (another change is not
        committed yet, the node is (not) a member already, or it is the leader itself);
        RaftUnavailable if no leader or not committed in time."""
        if self.syncobj._getLeader() is None:
            raise RaftUnavailable("no Raft leader at the moment")
        fut = self.loop.create_future()

        def done(result: Any, error: int) -> None:
            self.loop.call_soon_threadsafe(settle, fut, error)

        change = self.syncobj.addNodeToCluster if add else self.syncobj.removeNodeFromCluster
        change(node, callback=done)
        try:
            error = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise RaftUnavailable("the membership change was not committed in time; its "
                                  "outcome is unknown") from None
        if error == FAIL_REASON.REQUEST_DENIED:
            raise MembershipRefused("the leader refused the change (another one is not "
                                    "committed yet, or it changes nothing)")
        if error != FAIL_REASON.SUCCESS:
            raise RaftUnavailable(f"membership change failed: {FAIL_NAMES.get(error, error)}")

    async def transfer_leadership(self, to: Optional[str] = None) -> bool:
        """Ask a caught-up member (`to`, or the most caught-up one) to take over leadership
        (Raft's TimeoutNow). True once the request is sent: poll leader() to see it done."""
        fut = self.loop.create_future()

        def done(result: Any, error: int) -> None:
            self.loop.call_soon_threadsafe(settle, fut, error)

        try:
            self.syncobj.transferLeadership(to, callback=done)
            error = await asyncio.wait_for(fut, 5.0)
        except Exception as exc:  # an unknown target, or no answer
            log.info("leadership transfer not started: %s", exc)
            return False
        return error == FAIL_REASON.SUCCESS

    def leave_elections(self) -> None:
        """From now on this member never campaigns, votes or answers a pre-vote or a
        TimeoutNow (its peer is stopping: raft/leaving.py)."""
        self.syncobj.leaving.leave()

    async def hand_off(self, timeout: float) -> Optional[str]:
        """A stopping leader hands leadership over (Raft thesis 3.10): it appends nothing
        new meanwhile, asks the most caught-up connected member to take over at once
        (TimeoutNow), the next one if none has within an election timeout, and returns
        the new leader's id once it is known (None: none took over within `timeout`;
        this member goes on leading then)."""
        so, loop = self.syncobj, self.loop
        if not [m for m in self.members() if m != self.self_addr]:
            return None  # (a member alone: nobody to hand over to)
        deadline = loop.time() + timeout
        own = self.addr_to_node.get(self.self_addr, self.self_addr)
        tried: list[str] = []
        so.leaving.hold()
        try:
            while loop.time() < deadline:
                leader = self.leader()
                if leader is not None and leader != own:
                    return leader
                if not self.is_leader():  # stepped down: the winner is on its way
                    await asyncio.sleep(0.01)
                    continue
                targets = self._hand_off_targets(tried)
                if not targets:
                    if not tried:
                        return None  # (every other member is gone or leaving too)
                    tried.clear()  # every one tried: again, from the most caught up
                    await asyncio.sleep(0.02)
                    continue
                so.leaving.vote_for = targets[0]  # (a leaving member's one vote)
                if not await self.transfer_leadership(targets[0]):
                    await asyncio.sleep(0.02)  # not caught up yet (the log is held now)
                    continue
                tried.append(targets[0])
                log.info("handing Raft leadership over to %s", targets[0])
                until = min(deadline, loop.time() + self.max_timeout)
                while loop.time() < until and self.is_leader():
                    await asyncio.sleep(0.01)
                if self.is_leader():
                    log.warning("%s did not take Raft leadership over within %.1f s: asking "
                                "the next member", targets[0], self.max_timeout)
            return None
        finally:
            so.leaving.release()

    def _hand_off_targets(self, tried: list[str]) -> list[str]:
        """The connected members not tried yet and not leaving themselves, the most caught
        up first."""
        left = self.syncobj.leaving.left
        others = [m for m in self.members() if m != self.self_addr and m not in tried
                  and m not in left and self.connected(m)]
        return sorted(others, key=lambda m: -(self.match_index(m) or 0))

    def voting(self) -> bool:
        """False on a non-voting member, and while a member whose data was lost catches
        up (raft/amnesia.py)."""
        return self.current.is_voter and self.syncobj.voting

    def readonly_connected(self) -> int:
        """On a voter: how many non-voting members are connected to it now."""
        try:  # getStatus iterates sets the tick thread may be changing
            return int(self.syncobj.getStatus().get("readonly_nodes_count") or 0)
        except RuntimeError:
            return 0
