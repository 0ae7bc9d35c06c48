"""Livy's batch API through real peers, driven by a real Livy client from PyPI (`livy`,
the one Airflow users script against): create, wait, state, log, list, kill."""
import asyncio
import os
import textwrap

from tests.conftest import running
from tests.helpers import ahttp, poll


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
            poll(lambda: killable.state == SessionState.RUNNING, 60,  # each .state: a GET
                 what="the second batch running")
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


async def test_applications_on_s3_through_livy_and_jm_run(tmp_path):
    """`file` and `pyFiles` on s3:// (Hadoop's s3a:// spelling too), as Airflow users on EMR
    write them, and `jm run s3://...` as spark-submit takes it: the peer copies them into
    artifacts, any peer runs the job. A missing object, a bad bucket name are 400s, a file
    beyond rest.max-body-size a 413, each naming the field; nothing is submitted."""
    from tests.integration.test_cli import jm
    import io
    import zipfile
    from livy import LivyBatch
    from livy.models import SessionState
    from tests.s3server import BUCKET, peer_settings, s3_server
    out = tmp_path / "out.txt"
    lib = io.BytesIO()
    with zipfile.ZipFile(lib, "w") as z:
        z.writestr("etl_lib.py", "def greet(day):\n    return 'loaded ' + day\n")
    app = textwrap.dedent(f"""
        import sys
        import etl_lib
        open({str(out)!r}, "w").write(etl_lib.greet(sys.argv[1]))
        """)
    with s3_server(str(tmp_path / "moto.log")) as (endpoint, s3):
        s3.put_object(Bucket=BUCKET, Key="apps/etl.py", Body=app.encode())
        s3.put_object(Bucket=BUCKET, Key="apps/etl_lib.zip", Body=lib.getvalue())
        s3.put_object(Bucket=BUCKET, Key="apps/big.zip", Body=b"x" * 70_000)
        settings = {**peer_settings(endpoint), "rest.max-body-size": "64 kb"}
        async with running(str(tmp_path / "c"), 3, settings) as c:
            url = c.url(2)

            def drive():
                batch = LivyBatch.create(url, file=f"s3://{BUCKET}/apps/etl.py",
                                         py_files=[f"s3a://{BUCKET}/apps/etl_lib.zip"],
                                         args=["2026-11-24"])
                return batch.batch_id, batch.wait()
            number, state = await asyncio.to_thread(drive)
            assert state == SessionState.SUCCESS, state
            assert out.read_text() == "loaded 2026-11-24"
            s, b = await ahttp("GET", c.url(0) + f"/batches/{number}")
            assert s == 200 and b["name"] == "etl.py"
            s, arts = await ahttp("GET", c.url(0) + "/artifacts")
            arts_by_name = {a["name"]: a["id"] for a in arts["artifacts"]}
            assert s == 200 and {"etl.py", "etl_lib.zip"} <= set(arts_by_name)
            out.unlink()
            rc, stdout, err = await jm("-a", c.url(0), "run", f"s3a://{BUCKET}/apps/etl.py",
                                       "2026-11-25", "--py-files",
                                       f"s3://{BUCKET}/apps/etl_lib.zip", "--wait")
            assert rc == 0 and out.read_text() == "loaded 2026-11-25", (stdout, err)
            jid = err.split("[jm] job ", 1)[1].split()[0]
            s, job = await ahttp("GET", c.url(1) + f"/jobs/{jid}")
            assert s == 200 and job["name"] == "etl.py", job
            assert job["spec"]["script"] == "artifact:" + arts_by_name["etl.py"]
            s, b = await ahttp("POST", url + "/batches",
                               {"file": f"s3://{BUCKET}/apps/etl.py",
                                "pyFiles": [f"s3://{BUCKET}/apps/missing.zip"]})
            assert s == 400 and "pyFiles" in b["errors"][0] and "missing.zip" in b["errors"][0]
            s, b = await ahttp("POST", url + "/batches", {"file": f"s3://{BUCKET}/apps/etl.py",
                                                          "pyFiles": [f"s3://{BUCKET}/apps/big.zip"]})
            assert s == 413 and "rest.max-body-size" in b["errors"][0]
            s, b = await ahttp("POST", url + "/batches", {"file": "s3://no_such bucket/x.py"})
            assert s == 400 and "bucket" in b["errors"][0]
            s, b = await ahttp("GET", url + "/batches")
            assert s == 200 and b["total"] == 2  # the refused ones made no job
            # a retried submission (its answer lost) is the same job: the remote file is
            # not read again (here it is gone by then)
            s3.put_object(Bucket=BUCKET, Key="apps/once.py", Body=b"print('once')\n")
            once = {"script": f"s3://{BUCKET}/apps/once.py"}
            s, first = await ahttp("POST", c.url(0) + "/jobs", once,
                                   headers={"X-Request-Id": "once-1"})
            assert s == 202, first
            s3.delete_object(Bucket=BUCKET, Key="apps/once.py")
            s, again = await ahttp("POST", c.url(0) + "/jobs", once,
                                   headers={"X-Request-Id": "once-1"})
            assert s == 202 and again["jobid"] == first["jobid"], again
            s, b = await ahttp("POST", c.url(0) + "/jobs", once,
                               headers={"X-Request-Id": "once-2"})
            assert s == 400 and "once.py" in b["errors"][0], b  # a new request reads it
