"""The jobmanager process: one peer assembled from every layer (jm/cluster's parts, Raft,
the REST app), started and stopped (`python -m jm.peer`). Nothing below imports it."""
