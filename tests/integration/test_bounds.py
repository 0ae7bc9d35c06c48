"""Bounded everything through real in-process peers: a job that sys.exit()s with a lone
surrogate or a 5 MB message ends FAILED with a readable, truncated text (and a cancel of
it is answered); an oversized spec is a 413 naming its key; a NaN multiplier is a 400."""
import os

from tests.conftest import running
from tests.helpers import ahttp, apoll, asubmit_to

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


async def _ended(c, jid, states=("FAILED",), timeout=60):
    async def check():
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        return b if s == 200 and b["state"] in states else None
    return await apoll(check, timeout, what=f"job {jid} in {states}")


async def test_exit_messages_end_failed_readable_and_truncated(tmp_path):
    async with running(str(tmp_path), 2, {"jobmanager.failure.max-size": "4 kb"}) as c:
        unreadable = await asubmit_to(c, {
            "entry": "bounds_jobs:exit_unreadable", "pyfiles": [FIX],
            "restart-strategy": {"type": "fixed-delay", "attempts": 1, "delay": "100 ms"}})
        huge = await asubmit_to(c, {"entry": "bounds_jobs:exit_huge", "pyfiles": [FIX],
                                    "restart-strategy": {"type": "none"}}, peer=1)
        await _ended(c, unreadable)
        await _ended(c, huge)
        s, ex = await ahttp("GET", c.url(1) + f"/jobs/{unreadable}/exceptions")
        assert s == 200
        texts = [e["exception"] for e in ex["all-exceptions"] if e["failure"]]
        # the failure is kept, readable: the byte shows as its escape; an exit before any
        # Spark ran is not restarted, whatever the strategy (jm/policy/jobs/hopeless.py)
        assert texts == ["SystemExit: cannot read input-\\udcff.csv"], texts
        assert ex["all-exceptions"][0]["final"] is True
        assert ex["all-exceptions"][0]["reason"] == (
            "not restarted: it exited with a message before its Spark application started")
        s, ex = await ahttp("GET", c.url(0) + f"/jobs/{huge}/exceptions")
        root = ex["root-exception"]
        assert root.startswith("SystemExit: xxxx") and "[truncated, " in root
        assert len(root.encode()) <= 4096
        s, res = await ahttp("GET", c.url(0) + f"/jobs/{huge}/result")
        assert res["state"] == "FAILED" and "[truncated, " in res["failure"]
        # a cancel of an ended job is answered at once (it is not stuck RUNNING)
        s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{unreadable}?mode=cancel")
        assert s == 409 and "already ended FAILED" in b["errors"][0]


async def test_a_cancel_of_a_job_restarting_after_an_unreadable_failure_ends(tmp_path):
    async with running(str(tmp_path), 1) as c:
        jid = await asubmit_to(c, {
            "entry": "bounds_jobs:raise_unreadable", "pyfiles": [FIX],
            "restart-strategy": {"type": "fixed-delay", "attempts": 5, "delay": "60 s"}})
        await _ended(c, jid, ("RESTARTING",))
        s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
        assert s == 202, b
        await _ended(c, jid, ("CANCELED",))
        s, ex = await ahttp("GET", c.url(0) + f"/jobs/{jid}/exceptions")
        assert ex["all-exceptions"][0]["exception"] == \
            "OSError: cannot read input-\\udcff.csv"


async def test_spec_limits_and_restart_numbers_at_the_rest_api(tmp_path):
    async with running(str(tmp_path), 1, {"jobmanager.spec.max-size": "64 kb",
                                          "jobmanager.spec.max-args-size": "8 kb"}) as c:
        url = c.url(0) + "/jobs"
        s, b = await ahttp("POST", url, {"entry": "m:f", "spark-conf": {"spark.x": "y" * 70_000}})
        assert s == 413 and "jobmanager.spec.max-size" in b["errors"][0], b
        s, b = await ahttp("POST", url, {"entry": "m:f", "args": {"blob": "x" * 10_000}})
        assert s == 413 and "jobmanager.spec.max-args-size" in b["errors"][0], b
        # a Livy batch becomes a spec: its body is read no further than a spec may be
        s, b = await ahttp("POST", c.url(0) + "/batches", {"file": "/x.py", "conf": {
            "spark.x": "y" * 70_000}})
        assert s == 413 and "jobmanager.spec.max-size" in b["errors"][0], b
        s, b = await ahttp("POST", c.url(0) + "/batches", raw=b"[" * 70_000,  # never parsed
                           headers={"Content-Type": "application/json"})
        assert s == 413 and "jobmanager.spec.max-size" in b["errors"][0], b
        # sent without a length (chunked): refused after reading, naming the key
        async def chunks():
            yield b'{"entry": "m:f", "args": {"blob": "'
            for _ in range(20):
                yield b"x" * 4096
            yield b'"}}'
        import aiohttp
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=chunks(),
                                    headers={"Content-Type": "application/json"}) as resp:
                body = await resp.json()
                assert resp.status == 413 and "jobmanager.spec.max-size" in body["errors"][0]
        s, b = await ahttp("POST", url, {"entry": "m:f", "restart-strategy": {
            "type": "exponential-delay", "backoff-multiplier": "NaN"}})
        assert s == 400 and "restart-strategy.backoff-multiplier" in b["errors"][0], b
        s, b = await ahttp("POST", url, {"entry": "m:f", "args": {
            "file": os.fsdecode(b"in-\xff.csv")}})
        assert s == 400 and "not valid Unicode" in b["errors"][0], b
        s, b = await ahttp("POST", c.url(0) + "/jobs/ghost/savepoints",
                           {"target-directory": "/tmp/" + os.fsdecode(b"\xff")})
        assert s == 400 and "not valid Unicode" in b["errors"][0], b
        s, lst = await ahttp("GET", url)
        assert lst["jobs"] == []


async def test_files_a_job_leaves_are_read_only_as_bounded_regular_files(tmp_path):
    """jm/cluster/jobs/jobfiles.py: a job that leaves error.json as a link to /dev/zero (the
    peer allocated until the OOM killer came) or result.json as a FIFO (a peer thread
    blocked for good, the job RUNNING for ever) ends FAILED, saying why; the peers live."""
    async with running(str(tmp_path), 2) as c:
        none = {"type": "none"}
        linked = await asubmit_to(c, {"entry": "bounds_jobs:leave_linked_error", "pyfiles": [FIX],
                                      "args": {"base": str(tmp_path)}, "restart-strategy": none})
        fifo = await asubmit_to(c, {"entry": "bounds_jobs:leave_fifo_result", "pyfiles": [FIX],
                                    "args": {"base": str(tmp_path)}, "restart-strategy": none},
                                peer=1)
        await _ended(c, linked)
        await _ended(c, fifo)
        s, ex = await ahttp("GET", c.url(1) + f"/jobs/{linked}/exceptions")
        assert ex["root-exception"] == ("the job process exited with code 3; its error.json "
                                        "is a symbolic link"), ex
        s, ex = await ahttp("GET", c.url(0) + f"/jobs/{fifo}/exceptions")
        assert ex["root-exception"] == ("ValueError: the job's result.json is a FIFO, not a "
                                        "regular file"), ex
        for i in range(2):
            s, b = await ahttp("GET", c.url(i) + "/healthz")
            assert s == 200 and b["ok"], b


async def test_results_with_nan_or_infinities_are_answered_as_valid_json(tmp_path):
    """JSON has no NaN or Infinity: Python writes them by default, and every strict
    client (a browser's JSON.parse, Jackson, Go) refuses the whole answer. Such numbers in
    a job's result are answered as strings."""
    import json

    import aiohttp

    def strict(text):
        def refuse(name):
            raise ValueError(f"not JSON: {name}")
        return json.loads(text, parse_constant=refuse)
    async with running(str(tmp_path), 1) as c:
        own = await asubmit_to(c, {"entry": "bounds_jobs:not_numbers", "pyfiles": [FIX]})
        left = await asubmit_to(c, {"entry": "bounds_jobs:leave_nan_result", "pyfiles": [FIX],
                                    "args": {"base": str(tmp_path)}})
        for jid in (own, left):
            await _ended(c, jid, ("FINISHED", "FAILED"))
        results = []
        async with aiohttp.ClientSession() as http:
            for jid in (own, left):
                for path in (f"/jobs/{jid}/result", f"/v1/jobs/{jid}/execution-result",
                             f"/jobs/{jid}"):
                    async with http.get(c.url(0) + path) as resp:
                        body = strict(await resp.text())
                results.append(body["result"])
        assert results == [{"nan": "nan", "inf": ["inf", "-inf"], "ok": 1.5},
                           {"x": "NaN", "y": "-Infinity"}], results
