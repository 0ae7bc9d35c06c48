"""What a peer's REST gateway asks of it, one role object each (`gw.jobs`, `gw.views`, `gw.cluster`, ...: jm/cluster/api/gateway.py), and the reads and checks they share."""
