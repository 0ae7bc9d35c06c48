"""Livy's batch API through real peers, driven by a real Livy client from PyPI (`livy`,
the one Airflow users script against): create, wait, state, log, list, kill."""
import asyncio
import os
import textwrap
import time

from tests.conftest import running
from tests.helpers import ahttp


def _app(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


async def test_livy_client_runs_and_kills_batches(tmp_path):
    from livy import LivyBatch
    from livy.client import LivyClient
    from livy.models import SessionState
    out = tmp_path / "out.txt"
    app = _app(tmp_path, "etl.py", f"""
        import sys
        print("etl starting", sys.argv[1:])
        open({str(out)!r}, "w").write(" ".join(sys.argv[1:]))
        """)
    slow = _app(tmp_path, "slow.py", """
        import time
        print("waiting", flush=True)
        time.sleep(600)
        """)
    async with running(str(tmp_path / "c"), 3) as c:  # a 3-peer cluster; any peer
        url = c.url(1)

        def drive():
            batch = LivyBatch.create(url, file=f"local:{app}", args=["2026-11-23", "x"],
                                     name="nightly", spark_conf={"spark.app.name": "etl"})
            state = batch.wait()
            log = batch.log()
            client = LivyClient(url)
            listed = client.list_batches()
            killable = LivyBatch.create(url, file=slow)
            deadline = time.monotonic() + 60
            while killable.state != SessionState.RUNNING:  # each .state is a GET
                assert time.monotonic() < deadline, "the second batch never ran"
                time.sleep(0.05)  # poll interval
            killable.kill()
            end = killable.wait()
            return batch.batch_id, state, log, listed, killable.batch_id, end
        first, state, log, listed, second, end = await asyncio.to_thread(drive)
        assert state == SessionState.SUCCESS
        assert out.read_text() == "2026-11-23 x"
        assert any("etl starting" in line for line in log)
        assert [b.batch_id for b in listed] == [first]
        assert end == SessionState.KILLED and second == first + 1
        # errors are Livy clients' 4xx with our {"errors": [...]}
        s, b = await ahttp("POST", url + "/batches", {"file": "hdfs://nn/etl.py"})
        assert s == 400 and "hdfs://" in b["errors"][0]
        s, b = await ahttp("GET", url + "/batches/999")
        assert s == 404 and b["errors"]
        s, b = await ahttp("GET", url + "/batches/x/state")
        assert s == 404
        s, b = await ahttp("GET", c.url(2) + f"/batches/{first}/state")
        assert s == 200 and b == {"id": first, "state": "success"}
        s, b = await ahttp("GET", url + "/batches?from=1&size=5")
        assert s == 200 and b["total"] == 2 and [x["id"] for x in b["sessions"]] == [second]
        s, b = await ahttp("GET", url + "/version")
        assert s == 200 and b["version"]
    assert os.path.exists(out)
