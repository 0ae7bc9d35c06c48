"""jm/policy/members/podlife.py (pure): a StatefulSet pod joins the membership when it is not a
member and leaves it when it is scaled away; and jm/local/kube.py reads no replicas
outside Kubernetes (its preStop then leaves the pod's end to the SIGTERM drain)."""
import pytest

from jm.local.kube import desired_replicas
from jm.policy.members.podlife import ADD, START, gone, how_to_join, ordinal, scaled_away

NODE = "jm-3.jm-peers.data.svc.cluster.local:6123"


@pytest.mark.parametrize("pod,n", [("jm-0", 0), ("jm-12", 12), ("my-jm-3", 3),
                                   ("jm", None), ("jm-x", None), ("-3", None)])
def test_ordinal(pod, n):
    assert ordinal(pod) == n


@pytest.mark.parametrize("pod,replicas,away", [
    ("jm-3", 3, True), ("jm-4", 3, True), ("jm-2", 3, False), ("jm-0", 0, True),
    ("jm-3", None, False),  # unknown replicas: a restart (the SIGTERM drain)
    ("jm", 1, False),
])
def test_scaled_away(pod, replicas, away):
    assert scaled_away(pod, replicas) is away


def _answer(members=(), readers=(), removed=()):
    return {"members": [{"id": m, "role": "follower"} for m in members],
            "non-voters": [{"id": r} for r in readers], "removed": list(removed)}


@pytest.mark.parametrize("answer,action,why", [
    (None, START, "no seed answered"),
    (_answer(members=[NODE]), START, "member already"),
    (_answer(readers=[NODE]), START, "member already"),
    (_answer(members=["other:1"]), ADD, "scaled up"),
    (_answer(removed=[NODE]), ADD, "removed before"),
    ("not json", START, "no seed answered"),
])
def test_how_to_join(answer, action, why):
    d = how_to_join(NODE, answer)
    assert d.action == action and why in d.reason


def test_gone_once_removed_and_no_member():
    assert gone(NODE, _answer(removed=[NODE]))
    assert not gone(NODE, _answer(members=[NODE], removed=[NODE]))  # still in Raft
    assert not gone(NODE, _answer(readers=[NODE]))
    assert not gone(NODE, None)


def test_no_replicas_outside_kubernetes(tmp_path):
    assert desired_replicas("jm-3", environ={}) is None
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1",
           "POD_NAMESPACE": "data"}
    assert desired_replicas("jm-3", environ=env, sa_dir=str(tmp_path)) is None  # no token
