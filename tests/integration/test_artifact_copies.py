"""An upload is acknowledged with a second, durable copy in the shared storage dir: a job
that needs the artifact runs on another peer even when the only peer that received the
upload is gone (real peers in-process)."""
import hashlib
import os

from tests.conftest import running
from tests.helpers import ahttp, apoll, multipart


async def test_an_artifact_survives_the_peer_it_was_uploaded_to(tmp_path):
    out = tmp_path / "out.txt"
    code = f"def main(ctx):\n    open({str(out)!r}, 'w').write('ran')\n".encode()
    async with running(str(tmp_path / "c"), 3, {"rebalance.strategy": "none"}) as c:
        payload, ctype = multipart("copied_job.py", code)
        s, art = await ahttp("POST", c.url(0) + "/artifacts", raw=payload,
                             headers={"Content-Type": ctype})
        assert s == 201, art
        digest = art["id"].split(":", 1)[1]
        shared = os.path.join(str(tmp_path / "c"), "ha", "blobs", digest, "copied_job.py")
        with open(shared, "rb") as f:  # there before the 201
            assert hashlib.sha256(f.read()).hexdigest() == digest
        uploader = c.peers[0]
        await uploader.stop()  # the only peer that holds it (perhaps the leader)

        async def submitted():  # a 503 while the others elect a leader: sent again
            s, b = await ahttp("POST", c.url(1) + "/jobs",
                               {"entry": "copied_job:main", "pyfiles": [art["pyfile"]]},
                               headers={"X-Request-Id": "after-the-uploader-stopped"})
            assert s in (202, 503), b
            return b["jobid"] if s == 202 else None
        jid = await apoll(submitted, 30, interval=0.2, what="the job accepted")

        async def ended():
            s, j = await ahttp("GET", c.url(1) + f"/jobs/{jid}")
            return j if j.get("state") in ("FINISHED", "FAILED") else None
        job = await apoll(ended, 60, what="the job ended")
        assert job["state"] == "FINISHED", job
        assert out.read_text() == "ran"
