"""The peer as a member of the cluster: its lease and heartbeats, Raft membership and the voting core, the ResourceManager that places jobs on the leader, the drain of a stopping peer."""
