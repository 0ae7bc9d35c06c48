"""Wire formats (pure): what the REST API answers, built from the replicated state and
results: the cluster's JSON views, Flink's failure causes and SQL column infos, Livy's
batches. Held to jm/policy's rules (no I/O, no clock, no service); rest/ shapes the rest
of each answer from the gateway's typed results."""
