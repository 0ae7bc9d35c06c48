import os

from tests.helpers import ahttp, apoll

FIX = os.path.dirname(os.path.abspath(__file__))


async def test_submit_and_finish(cluster3):
    c = cluster3
    status, body = await ahttp("POST", c.url(1) + "/jobs",
                               {"entry": "jobs_fixture:quick", "pyfiles": [FIX + "/"],
                                "args": {"x": 1}})
    assert status == 202, body
    jid = body["jobid"]

    async def finished():
        s, b = await ahttp("GET", c.url(2) + f"/jobs/{jid}")
        return b if s == 200 and b["state"] == "FINISHED" else None
    job = await apoll(finished, 30, what="job finished")
    assert job["result"]["job"] == jid
    assert job["result"]["args"] == {"x": 1}
