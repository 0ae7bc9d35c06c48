"""The leader's liveness decisions (pure): when a peer counts as dead, and what a new
leader keeps of the heartbeat times it applied as a follower."""
from jm.cluster.members.resourcemanager import dead_peers, takeover_last_seen

TIMEOUT, GRACE = 3.0, 1.0


def test_a_peer_is_dead_only_after_a_full_timeout_without_heartbeat():
    seen = {"a": 10.0, "b": 12.5}
    assert dead_peers(seen, ["a", "b"], 13.0, TIMEOUT) == []
    assert dead_peers(seen, ["a", "b"], 13.01, TIMEOUT) == ["a"]
    assert dead_peers(seen, ["a", "b"], 15.51, TIMEOUT) == ["a", "b"]
    # a peer never seen is not declared dead on the spot
    assert dead_peers({}, ["c"], 100.0, TIMEOUT) == []


def test_new_leader_counts_from_the_heartbeats_it_applied_as_a_follower():
    # the old leader "a" sent its last heartbeat, applied here at 10.0, then died;
    # the election ended at 10.6
    seen = takeover_last_seen({"a": 10.0, "b": 10.4, "c": 10.5}, ["a", "b", "c"], 10.6,
                              TIMEOUT, GRACE)
    assert seen == {"a": 10.0, "b": 10.4, "c": 10.5}
    # "a" is dead a full timeout after its last heartbeat, not after election + timeout
    assert dead_peers(seen, ["a", "b", "c"], 13.05, TIMEOUT) == ["a"]


def test_every_peer_gets_the_grace_from_the_takeover():
    # a long election: nobody could renew while it ran
    seen = takeover_last_seen({"a": 10.0, "b": 10.4}, ["a", "b"], 12.9, TIMEOUT, GRACE)
    assert seen["a"] == seen["b"] == 12.9 - TIMEOUT + GRACE
    assert dead_peers(seen, ["a", "b"], 12.9 + GRACE - 0.01, TIMEOUT) == []
    assert dead_peers(seen, ["a", "b"], 12.9 + GRACE + 0.01, TIMEOUT) == ["a", "b"]


def test_a_peer_never_applied_here_gets_the_full_timeout():
    seen = takeover_last_seen({"a": 10.0}, ["a", "new"], 11.0, TIMEOUT, GRACE)
    assert seen["new"] == 11.0
    assert dead_peers(seen, ["a", "new"], 13.5, TIMEOUT) == ["a"]
    assert dead_peers(seen, ["a", "new"], 14.01, TIMEOUT) == ["a", "new"]


def test_full_grace_is_the_old_restart_from_the_takeover():
    seen = takeover_last_seen({"a": 10.0, "b": 10.9}, ["a", "b"], 11.0, TIMEOUT, TIMEOUT)
    assert seen == {"a": 11.0, "b": 11.0}


def test_a_snapshot_load_forgets_the_recorded_heartbeat_times():
    import asyncio

    from jm.cluster.members.resourcemanager import ResourceManager
    from raft.commands import Heartbeat
    from raft.state import Result

    class Hooks:
        def __init__(self):
            self.apply_hooks, self.load_hooks = [], []

        def subscribe(self):
            return asyncio.Event()

    raft, clock = Hooks(), [5.0]
    rm = ResourceManager(raft, 3.0, 1.0, monotonic=lambda: clock[0], takeover_grace=1.0)
    for hook in raft.apply_hooks:
        hook(Heartbeat("a", 100.0), Result(True))
    assert rm.last_seen == {"a": 5.0}
    for hook in raft.load_hooks:  # the state now holds heartbeats not applied here
        hook()
    clock[0] = 6.0
    # at a takeover, "a" counts as never seen: a full timeout from the takeover
    assert takeover_last_seen(rm.last_seen, ["a"], 6.0, 3.0, 1.0) == {"a": 6.0}
