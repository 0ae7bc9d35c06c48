"""Raft membership of the peers: where a starting peer gets its member list, the file that
keeps the list this peer last saw, and the leader's reconciliation that makes the Raft
membership follow the replicated state (raft/members.py).

* A starting peer asks the peers of conf/masters (the seed list) for the current members
  and starts with them. A seed answered and does not list it: it is not a member (add it
  first with `POST /cluster/peers`); if it has Raft data and the answer (given after a
  Raft barrier: a majority's committed state) lists it as removed in the cluster its data
  belongs to (the identity file's id), it was removed while it was away, and its data is
  set aside so that it can join anew; any other answer leaves the data in place.
* No seed answered (the whole cluster is starting): the members it last saw
  (`<data>/raft/members`, rewritten whenever its membership changes), else, for a line of
  conf/masters, conf/masters itself: the cluster is being created. pysyncobj's journal and
  snapshot then bring any later change.
* The leader (`Membership.step`, run by the ResourceManager): retires a leaving peer that
  holds no job any more; adds the members the state says are joining; takes every
  tombstoned node out of the Raft membership, handing leadership over first if that is
  itself. A live, connected member first gets the entry that removed it (so that it sees
  its removal and stops); one that was dead when removed, or that the leader cannot reach,
  is taken out at once: waiting could not tell it anything and would only keep the quorum
  larger than the live members (a second loss then loses the majority).
  One change at a time, each committed before the next (pysyncobj refuses others).
  With none of these to make, it keeps the voting core whole (jm/cluster/members/voting.py).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any, Callable, Optional

from jm.config import Config, ConfigError, PeerAddress
from jm.cluster.peerclient import PeerClient, PeerUnreachable
from jm.cluster.members.identity import read_identity
from jm.policy.members.voters import (NON_VOTING, VOTER, SeedMembers, VotersError, removal_proven,
                                      start_role)
from raft.commands import RetirePeer
from raft.members import holds_jobs
from raft.records import ALIVE
from raft.node import MembershipRefused, RaftHost, RaftSettings, RaftUnavailable

log = logging.getLogger("jm.membership")

MEMBERS_FILE = "members"
CATCH_UP_WAIT = 5.0     # s a removed member gets to receive its removal before it is cut off
APPLY_WAIT = 0.5        # s after it has the entry: the next heartbeats carry its commit


def load_members(raft_dir: str) -> Optional[tuple[list[str], str]]:
    """The voters and this peer's role it saved last (None: no file)."""
    try:
        with open(os.path.join(raft_dir, MEMBERS_FILE)) as f:
            data = json.load(f)
        members, role = data["members"], data.get("role", VOTER)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(members, list) or not members or role not in (VOTER, NON_VOTING):
        return None
    return [str(m) for m in members], role


def save_members(raft_dir: str, members: list[str], role: str = VOTER) -> None:
    """Atomically (write, fsync, rename), so a power cut leaves the old or the new list."""
    path = os.path.join(raft_dir, MEMBERS_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"members": sorted(members), "role": role, "time": time.time()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def has_raft_data(raft_dir: str) -> bool:
    return any(os.path.exists(os.path.join(raft_dir, name))
               for name in ("raft.journal", "raft.dump", MEMBERS_FILE))


async def ask_seeds(seeds: list[PeerAddress], client: PeerClient, timeout: float = 1.5,
                    scheme: str = "http") -> Optional[SeedMembers]:
    """The membership according to the first seed that answers GET /cluster/peers (which
    answers after a Raft barrier, so with every committed change; no leader: no answer)."""
    return await ask_members([seed.url(scheme) for seed in seeds], client, timeout)


async def ask_members(urls: list[str], client: PeerClient,
                      timeout: float = 1.5) -> Optional[SeedMembers]:
    for url in urls:
        try:
            answer = await client.call("GET", url + "/cluster/peers", timeout)
            if answer.status != 200:
                continue
            body = answer.body
            return SeedMembers(tuple(str(m["id"]) for m in body["members"]),
                               tuple(str(n["id"]) for n in body.get("non-voters", ())),
                               tuple(str(n) for n in body.get("removed", ())),
                               body.get("cluster-id") or None)
        except (PeerUnreachable, KeyError, TypeError, AttributeError):
            continue
    return None


async def initial_members(me: PeerAddress, masters: list[PeerAddress], raft_dir: str,
                          client: PeerClient, voters: int, scheme: str = "http"
                          ) -> tuple[str, list[str]]:
    """This peer's role and the voters it starts with (see the module's docstring and
    jm/policy/members/voters.py). ConfigError when the cluster says this peer is not a member."""
    seeds = [m for m in masters if m != me]
    current = await ask_seeds(seeds, client, scheme=scheme) if seeds else None
    lines = [m.raft_addr for m in masters]
    saved = load_members(raft_dir)
    if current is None and saved is None and me not in masters:
        if not has_raft_data(raft_dir):
            raise ConfigError(f"{me} is not in conf/masters and no peer of conf/masters "
                              "answered: cannot find the cluster to join")
        # a voter with data from before the members file: its journal brings the changes
        return VOTER, lines + [me.raft_addr]
    try:
        role, core = start_role(me.node_id, lines, current, saved, voters)
    except VotersError as exc:
        hint = f"add it first: jm cluster add-peer {me}"
        if current is None:
            raise ConfigError(str(exc)) from None
        if not has_raft_data(raft_dir):
            raise ConfigError(f"{exc}; {hint}") from None
        own = (read_identity(raft_dir) or {}).get("cluster-id")
        if not removal_proven(me.node_id, current, own):
            raise ConfigError(
                f"{exc}, says a peer of cluster {current.cluster_id or '(no id)'}, but this "
                f"peer's Raft data (of cluster {own or '(unknown)'}) does not show that it "
                f"was removed from it: the data was left in {raft_dir}; check conf/masters, "
                f"or move the data away and {hint}") from None
        # removed while it was away (committed, in its own cluster): its data is stale
        aside = f"{raft_dir}.removed-{int(time.time())}"
        os.replace(raft_dir, aside)
        os.makedirs(raft_dir, exist_ok=True)
        raise ConfigError(f"{me} was removed from the cluster (voters: "
                          f"{', '.join(current.voters)}); its old Raft data is in "
                          f"{aside}; to join again, {hint}") from None
    return role, core


def removal_due(waited: float, has_entry: bool, dead: bool, connected: bool) -> bool:
    """Whether the leader takes a tombstoned member out of the Raft membership now, after
    `waited` s: at once if it was not alive when removed or cannot be reached (nothing to
    wait for); else once it has the entry that removed it (plus one heartbeat), or after
    CATCH_UP_WAIT."""
    if dead or not connected:
        return True
    return waited >= (APPLY_WAIT if has_entry else CATCH_UP_WAIT)


def raft_settings(conf: Config) -> RaftSettings:
    return RaftSettings(
        min_timeout=conf["raft.min-timeout"], max_timeout=conf["raft.max-timeout"],
        append_entries_period=conf["raft.append-entries-period"],
        leader_fallback_timeout=conf["raft.leader-fallback-timeout"],
        connection_retry_time=conf["raft.connection-retry-time"],
        use_batch=conf["raft.use-batch"], fsync=conf["raft.fsync"],
        password=conf["raft.password"] or conf["cluster.secret"],
        max_message_size=conf["raft.max-message-size"],
        max_connections=conf["raft.max-connections"])


class Membership:
    """Keeps this peer's members file current; on the leader, reconciles the Raft
    membership with the state (called by the ResourceManager's rounds)."""

    def __init__(self, raft: RaftHost, raft_dir: str, write_timeout: float,
                 core: Any = None, wall: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.raft = raft
        self.core = core  # jm.cluster.members.voting.VotingCore: promotions, demotions
        self.raft_dir = raft_dir
        self.write_timeout = write_timeout
        self.wall, self.mono = wall, mono
        self._saved: Optional[list[str]] = None
        self._removal_seen: dict[str, tuple[float, int]] = {}  # node -> (mono, commit index)

    def persist(self) -> None:
        """Rewrite the members file if the membership changed (any peer, every round)."""
        members = self.raft.membership.members()
        if members != self._saved:
            try:
                save_members(self.raft_dir, members,
                             VOTER if self.raft.is_voter else NON_VOTING)
                self._saved = members
                log.info("Raft members: %s", ", ".join(members))
            except OSError as exc:
                log.warning("cannot write the members file: %s", exc)

    async def step(self) -> None:
        """One reconciliation round on the leader: at most one change."""
        members = self.raft.membership.members()
        with self.raft.read() as st:
            retire = [p.id for p in st.peers.values()
                      if p.leaving and p.state == ALIVE and not holds_jobs(st, p.id)]
            joining = [n for n in st.joining
                       if n not in members and n not in st.joining_readers]
            removed = [(n, n in st.removed_dead) for n in members if n in st.removed]
        for node in retire:
            res = await self.raft.submit(RetirePeer(node, self.wall()), self.write_timeout)
            if res.ok:
                log.info("peer %s drained and retired; it leaves the Raft membership", node)
        if removed:
            await self._remove(*removed[0])
        elif joining:
            await self._change(True, joining[0])
        elif self.core is not None:
            await self.core.step()

    async def _remove(self, node: str, dead: bool) -> None:
        if node == self.raft.self_addr:  # the leader cannot remove itself: hand over first
            log.info("this peer is being removed: handing leadership over")
            await self.raft.membership.hand_off(self.raft.settings.max_timeout * 2)
            return
        now = self.mono()
        seen, index = self._removal_seen.setdefault(
            node, (now, self.raft.membership.commit_index()))
        matched = self.raft.membership.match_index(node)
        has_it = matched is not None and matched >= index
        if not removal_due(now - seen, has_it, dead, self.raft.membership.connected(node)):
            # let it receive its removal, and a heartbeat that says it is committed, first
            # (it then stops by itself; if not, it finds out through Peer.watch_membership)
            return
        await self._change(False, node)
        self._removal_seen.pop(node, None)

    async def _change(self, add: bool, node: str) -> None:
        try:
            await self.raft.membership.change_member(add, node, self.write_timeout)
            log.info("Raft membership: %s %s", "added" if add else "removed", node)
        except MembershipRefused:
            pass  # another change is not committed yet: the next round tries again
        except RaftUnavailable as exc:
            log.info("Raft membership change of %s not committed: %s", node, exc)


class RemovalWatch:
    """Whether this peer was removed from the cluster: `removed` is set, and the peer
    stops (jm/peer/main.py)."""

    def __init__(self, node: str, raft: RaftHost, lease_expired: Callable[[], bool],
                 client: PeerClient, other_urls: Callable[[], list[str]],
                 removed: asyncio.Event) -> None:
        self.node, self.raft, self.lease_expired = node, raft, lease_expired
        self.client, self.other_urls, self.removed = client, other_urls, removed
        self._check: Optional[asyncio.Future] = None

    def check(self) -> None:
        """(on the loop) This peer's removal was applied: look once caught up."""
        if self._check is None or self._check.done():
            self._check = asyncio.ensure_future(self._caught_up_check())

    async def _caught_up_check(self) -> None:
        """Removed if the state, caught up with what the leader committed, still has this
        peer's tombstone (a peer added again after its removal has not)."""
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not self.raft.membership.caught_up():
            await asyncio.sleep(0.05)
        with self.raft.read() as st:
            removed = self.node in st.removed
        if removed:
            log.warning("peer %s was removed from the cluster; stopping", self.node)
            self.removed.set()

    async def watch(self, every: float = 2.0) -> None:
        """A peer cut off from Raft for a while (its lease ran out) asks the other peers
        whether it is still a member: one that was removed without hearing of it (the
        leader dropped it before its removal reached it) stops instead of waiting forever."""
        cut_off = 0
        while True:
            await asyncio.sleep(every)
            cut_off = cut_off + 1 if self.lease_expired() else 0
            if cut_off < 2:
                continue
            seen = await ask_members(self.other_urls(), self.client)
            if seen is not None and self.node not in seen.voters + seen.non_voters:
                log.warning("peer %s is not a member any more (voters: %s); stopping",
                            self.node, ", ".join(seen.voters))
                self.removed.set()
                return
