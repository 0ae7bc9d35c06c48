"""Testing a pipeline against the real control plane with jm.testing.MiniCluster:
two peers in this process (real Raft, REST and job processes) and one Spark Connect
server, in seconds once Spark is up.

    .venv/bin/python -m pytest examples/test_wordcount_minicluster.py
"""
import os

import pytest

from jm.testing import MiniCluster

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow  # starts a Spark JVM (this project's marker; drop it in your own tests)
def test_wordcount_counts_every_word(tmp_path):
    with MiniCluster(peers=2, spark=True, base_dir=str(tmp_path / "cluster")) as mc:
        job = mc.run({"entry": "wordcount:main", "pyfiles": [os.path.join(HERE, "wordcount.py")],
                      "args": {"input": os.path.join(HERE, "data", "words.txt"), "top": 3}},
                     timeout=300)
        assert job["state"] == "FINISHED", mc.exceptions(job["jid"])
        result = job["result"]
        assert result["total-words"] == 85 and result["top"][0] == ["the", 11]


def test_the_fixture_gives_a_running_cluster(mini_cluster):
    """`mini_cluster` (installed with the project as a pytest plugin): 2 peers, no Spark."""
    jid = mini_cluster.submit({"sql": "SELECT 1"})
    assert mini_cluster.job(jid)["jid"] == jid
    nodes = mini_cluster.request("GET", "/nodes")["nodes"]
    assert len(nodes) == 2 and all(n["state"] == "ALIVE" for n in nodes)
