"""Pure decisions about the cluster's members: the voting core and a starting peer's role, the amnesia guard, placement, quotas, drain and rebalancing, a stopping peer, a pod's life."""
