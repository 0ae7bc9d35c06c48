"""The voting core's upkeep: promoting non-voting members (jm/policy/members/voters.py).

A promotion, on request (`POST /cluster/peers/{node}/promote`) or by the leader's rounds
when the core is short of `raft.voters` (a voter removed, or one dead for
`raft.voter-replace-after` and taken out of the voters first):

1. the promoter reads the peer's applied index (any answer's X-JM-Index) and refuses one
   more than PROMOTE_MAX_LAG commands behind (409) without starting anything there: the
   leader's rounds look again every LAG_RETRY seconds, so a peer added back becomes a
   voter about as soon as it has caught up;
2. the promoter asks the peer to start its voting node (`POST /cluster/voter`, peers
   only), which answers with its applied index; one that does not answer, or is more
   than PROMOTE_MAX_LAG commands behind the promoter, is not caught up: refused (409);
3. the promoter adds it to the Raft membership (pysyncobj's change, made by the leader);
4. the peer's voting node gets the leader's log and takes over from its read-only one
   (raft/promotion.py). A peer whose voting node was not added within PROMOTE_TIMEOUT
   stops it and stays a non-voter.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Optional

from jm.cluster.peerclient import PeerClient, PeerUnreachable
from jm.policy.members.voters import PROMOTE_MAX_LAG, PeerView, core_step, promotion_refusal
from raft.node import MembershipRefused, RaftUnavailable
from raft.records import ALIVE

log = logging.getLogger("jm.voting")

PROMOTE_TIMEOUT = 30.0  # s a started voting node waits to be added before it gives up
RETRY_AFTER = 10.0      # s before the leader tries to promote the same peer again
LAG_RETRY = 1.0         # s before it looks again at a peer that was not caught up


class PromotionRefused(Exception):
    def __init__(self, status: int, message: str, behind: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.behind = behind  # only not caught up yet: worth another look soon


def peer_views(st) -> list[PeerView]:
    return [PeerView(p.id, p.state == ALIVE, p.declared_dead_at, p.leaving, p.draining)
            for p in st.peers.values()]


class VotingCore:
    """Promotes and demotes (on the leader's rounds, or when asked). `url_of(node)`: the
    REST base URL of a registered peer."""

    def __init__(self, raft: Any, target: int, replace_after: float, write_timeout: float,
                 url_of: Callable[[str], Optional[str]], client: PeerClient,
                 wall: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.raft, self.target, self.replace_after = raft, target, replace_after
        self.write_timeout = write_timeout
        self.url_of, self.client = url_of, client
        self.wall, self.mono = wall, mono
        self._tried: dict[str, float] = {}  # node -> when the leader may try it again

    # ---- the leader's rounds ---------------------------------------------------------------
    async def step(self) -> None:
        now = self.mono()
        self._tried = {n: t for n, t in self._tried.items() if now < t}
        voters = self.raft.membership.members()
        with self.raft.read() as st:
            views = peer_views(st)
        change = core_step(voters, views, self.target, self.wall(), self.replace_after,
                           self.raft.leader(), frozenset(self._tried))
        if change is None:
            return
        kind, node = change
        if kind == "demote":
            log.warning("voter %s has been dead for %.0f s or more: it leaves the voters "
                        "(a non-voter takes its place)", node, self.replace_after)
            if await self._change(False, node):
                await self.step()  # its replacement in the same round: the core is even
            return                 # no longer than the promotion takes
        self._tried[node] = now + RETRY_AFTER
        try:
            await self.promote(node)
            log.warning("non-voting member %s promoted: the voting core has %d voters",
                        node, len(self.raft.membership.members()))
        except PromotionRefused as exc:
            if exc.behind:
                self._tried[node] = now + LAG_RETRY
                log.debug("promotion of %s not done yet: %s", node, exc)
            else:
                log.info("promotion of %s not done: %s", node, exc)
        except RaftUnavailable as exc:
            log.info("promotion of %s not done: %s", node, exc)

    async def _change(self, add: bool, node: str) -> bool:
        try:
            await self.raft.membership.change_member(add, node, self.write_timeout)
            return True
        except MembershipRefused:
            return False  # another change is not committed yet: the next round tries again
        except RaftUnavailable as exc:
            log.info("Raft membership change of %s not committed: %s", node, exc)
            return False

    # ---- a promotion ----------------------------------------------------------------------
    async def promote(self, node: str) -> dict:
        voters = self.raft.membership.members()
        with self.raft.read() as st:
            view = next((v for v in peer_views(st) if v.id == node), None)
        why = promotion_refusal(node, voters, self.target, view)
        if why is not None:
            raise PromotionRefused(*why)
        url = self.url_of(node)
        if url is None:
            raise PromotionRefused(409, f"{node} has no REST address yet")
        self._refuse_behind(node, await self._applied(node, url))
        applied = await self._prepare(node, url, voters)
        try:
            self._refuse_behind(node, applied)
        except PromotionRefused:
            await self._abandon(url)
            raise
        try:
            await self.raft.membership.change_member(True, node, self.write_timeout)
        except MembershipRefused:
            await self._abandon(url)
            raise PromotionRefused(409, "another membership change is not committed yet; "
                                        "try again") from None
        return {"id": node, "role": "voter", "members": self.raft.membership.members()}

    def _refuse_behind(self, node: str, applied: int) -> None:
        lag = self.raft.applied_index() - applied
        if lag > PROMOTE_MAX_LAG:
            raise PromotionRefused(409, f"{node} is not caught up: {lag} commands behind "
                                        f"(at most {PROMOTE_MAX_LAG})", behind=True)

    async def _applied(self, node: str, url: str) -> int:
        """The index the peer has applied, from a cheap read's X-JM-Index."""
        try:
            answer = await self.client.call("GET", url + "/healthz", 3.0)
        except PeerUnreachable as exc:
            raise PromotionRefused(409, f"{node} is not caught up: it did not answer "
                                        f"({exc})") from None
        if answer.index is None:
            raise PromotionRefused(409, f"{node} did not say which Raft index it has "
                                        f"applied ({answer.status})")
        return answer.index

    async def _prepare(self, node: str, url: str, voters: list[str]) -> int:
        try:
            answer = await self.client.call("POST", url + "/cluster/voter",
                                            min(5.0, self.write_timeout),
                                            json={"voters": voters})
        except PeerUnreachable as exc:
            raise PromotionRefused(409, f"{node} is not caught up: it did not answer "
                                        f"({exc})") from None
        body = answer.body
        if answer.status != 200 or not isinstance(body, dict) or not isinstance(
                body.get("applied"), int):
            raise PromotionRefused(409, f"{node} cannot become a voter: {answer.status} "
                                        f"{answer.errors()}")
        return body["applied"]

    async def _abandon(self, url: str) -> None:
        try:
            await self.client.call("DELETE", url + "/cluster/voter", 3.0)
        except PeerUnreachable:
            pass  # it gives up by itself after PROMOTE_TIMEOUT


class VoterCandidate:
    """The peer's side: start the voting node when asked, give up if not added in time."""

    def __init__(self, raft: Any, timeout: float = PROMOTE_TIMEOUT) -> None:
        self.raft, self.timeout = raft, timeout
        self._watch: Optional[asyncio.Task] = None

    def begin(self, voters: list[str]) -> int:
        """Start (or keep) the voting node; this replica's applied index. ValueError if
        this peer votes already."""
        self.raft.promotion.begin_voting(voters)
        if self._watch is None or self._watch.done():
            self._watch = asyncio.get_running_loop().create_task(self._give_up_later())
        return self.raft.applied_index()

    def abandon(self) -> bool:
        return self.raft.promotion.abandon_voting()

    async def _give_up_later(self) -> None:
        deadline = self.mono_now() + self.timeout
        while self.mono_now() < deadline:
            if self.raft.is_voter:
                return
            await asyncio.sleep(0.2)  # a periodic check of a local flag
        if not self.raft.is_voter:
            self.raft.promotion.abandon_voting()

    @staticmethod
    def mono_now() -> float:
        return time.monotonic()
