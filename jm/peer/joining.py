"""How a peer joins its cluster (`join`): its role and the voters, asked of the seeds while
its REST port answers who it is, the amnesia guard, then its Raft member."""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from jm.cluster.members.identity import amnesia_guard, early_answer, serve_early
from jm.cluster.members.membership import has_raft_data, initial_members, raft_settings
from jm.config import Config, ConfigError, PeerAddress
from jm.peer.ground import Ground
from jm.policy.members.identity import NON_VOTER
from jm.policy.members.voters import NON_VOTING, VotersError, voter_count
from raft.node import RaftHost
from rest.app import auth_middleware

log = logging.getLogger("jm.cluster.peer")


@dataclass(frozen=True)
class Joined:
    raft: RaftHost
    had_data: bool  # it started with Raft data (a member before)


def voters_at_creation(conf: Config, masters: list[PeerAddress]) -> int:
    """How many of conf/masters vote when the cluster is created (ConfigError if
    raft.voters cannot be met)."""
    try:
        return voter_count(conf["raft.voters"], len(masters))
    except VotersError as exc:
        raise ConfigError(str(exc)) from None


async def join(conf: Config, me: PeerAddress, masters: list[PeerAddress], ground: Ground,
               voters: int, rejoin: bool) -> Joined:
    """This peer's role and the voters (asked of the seeds; `voters` of conf/masters vote
    in a new cluster), then its Raft member. `rejoin`: its Raft data was lost; it does
    not vote until it has caught up."""
    node, raft_dir = ground.node, ground.raft_dir
    had_data = has_raft_data(raft_dir)
    # until the REST app binds, the port answers who this peer is (a new cluster's
    # starting peers find each other: jm/policy/members/identity.py)
    early = await serve_early(
        conf["rest.bind-address"] or me.host, me.rest_port, ground.ssl_server,
        early_answer(had_data, raft_dir, node),
        auth_middleware(ground.token, ground.credential))
    try:
        role, members = await initial_members(me, masters, raft_dir, ground.peer_client,
                                              voters, ground.scheme)
        # (for every role: a non-voter keeps no log, but a data dir of another peer or
        # cluster is an operator's mistake all the same, and it may be promoted)
        mode = await amnesia_guard(
            had_data, raft_dir, node, [m.url(ground.scheme) for m in masters if m != me],
            ground.peer_client, rejoin, conf["cluster.seed-wait"])
    finally:
        await early.cleanup()
    others = [m for m in members if m != me.raft_addr]
    raft = RaftHost(me.raft_addr, others, raft_dir, raft_settings(conf),
                    asyncio.get_running_loop(), {}, no_vote=mode == NON_VOTER,
                    voter=role != NON_VOTING)
    log.info("peer %s starts as a %s (voters: %s)", node,
             "voter" if role != NON_VOTING else "non-voting member", ", ".join(members))
    raft.start_watch()
    return Joined(raft, had_data)
