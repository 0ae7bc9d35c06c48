"""Named pipelines through real peers (in-process, real Raft, REST and job processes; the
pipeline is the Spark-free `ticker`, laid out like a Spark query checkpoint): `jm pipeline
apply` of a directory creates, keeps and upgrades in place; the upgrade stops the
running version with a savepoint and starts the new spec from it (the sink has every
batch exactly once, the new version's first batch is the old one's next); history and
rollback; bad input; delete; another tenant's pipeline is not seen."""
import json
import os

from tests.conftest import running
from tests.helpers import ahttp, apoll
from tests.integration.test_cli import jm

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


def ticker(out, interval):
    return {"entry": "jobs_fixture:ticker", "pyfiles": [FIX], "job-type": "streaming",
            "args": {"output": str(out), "interval": interval}}


def sink(out) -> dict:
    """{batch: job id} of the sink; every batch from 0 on, none missing."""
    rows = {}
    for name in os.listdir(out):
        if name.isdigit():
            with open(os.path.join(out, name)) as f:
                rows[int(name)] = f.read().split()[0]
    assert sorted(rows) == list(range(len(rows))), "a batch is missing"
    return rows


async def _pipeline(c, name, peer=0, want=None):
    async def check():
        s, b = await ahttp("GET", c.url(peer) + f"/pipelines/{name}")
        assert s == 200, b
        return b if want is None or want(b) else None
    return await apoll(check, 60, what=f"pipeline {name}")


async def test_apply_keeps_upgrades_with_a_savepoint_and_rolls_back(tmp_path):
    out, conf = tmp_path / "sink", tmp_path / "pipelines"
    conf.mkdir()
    async with running(str(tmp_path / "c"), 2) as c:
        (conf / "clicks.json").write_text(json.dumps(ticker(out, 0.05)))
        (conf / "daily.json").write_text(json.dumps({"entry": "jobs_fixture:quick",
                                                      "pyfiles": [FIX]}))
        (conf / "README.md").write_text("not a pipeline")
        rc, said, err = await jm("-a", c.url(0), "pipeline", "apply", str(conf))
        assert rc == 0 and "clicks: created (version 1" in said and "daily: created" in said, \
            (said, err)
        v1 = await _pipeline(c, "clicks", 1, lambda b: b["state"] == "RUNNING")
        await apoll(lambda: len(os.listdir(out)) >= 5, 30, what="batches of version 1")
        rc, said, err = await jm("-a", c.url(1), "pipeline", "apply", str(conf))
        assert rc == 0 and "clicks: unchanged (version 1" in said, (said, err)
        # upgrade in place: a new spec, applied through the other peer
        (conf / "clicks.json").write_text(json.dumps(ticker(out, 0.06)))
        rc, said, err = await jm("-a", c.url(1), "pipeline", "apply", str(conf / "clicks.json"),
                                 "--wait")
        assert rc == 0 and "clicks: upgraded (version 2" in said, (said, err)
        # (the CLI's answer came through peer 1: peer 0's replica may still show version 1)
        v2 = await _pipeline(c, "clicks", 0,
                             lambda b: b["version"] == 2 and b["state"] == "RUNNING")
        assert v2["version"] == 2 and v2["jobid"] != v1["jobid"]
        old = (await ahttp("GET", c.url(0) + f"/jobs/{v1['jobid']}"))[1]
        assert old["state"] == "FINISHED" and old["savepoint"], old
        assert v2["versions"][1]["restored-from"] == old["savepoint"]
        n = len(sink(out))
        await apoll(lambda: len(os.listdir(out)) >= n + 5, 30, what="batches of version 2")
        rows = sink(out)
        first_new = old["result"]["next"]
        assert {rows[b] for b in range(first_new)} == {v1["jobid"]}, rows
        assert {rows[b] for b in range(first_new, len(rows))} == {v2["jobid"]}, rows
        # history and rollback (a new version with version 1's spec)
        rc, said, err = await jm("-a", c.url(0), "pipeline", "history", "clicks")
        assert rc == 0 and [ln.split("\t")[0] for ln in said.splitlines()] == ["1", "2"], said
        rc, said, err = await jm("-a", c.url(0), "pipeline", "rollback", "clicks", "--wait")
        assert rc == 0 and "back to version 1's spec: upgraded (version 3" in said, (said, err)
        v3 = await _pipeline(c, "clicks", 1,
                             lambda b: b["version"] == 3 and b["state"] == "RUNNING")
        assert v3["spec"]["args"]["interval"] == 0.05
        await _bad_input_and_delete(c, conf, v3)


async def _bad_input_and_delete(c, conf, v3):
    for name, body, status in (("clicks", {"jobid": "x", "entry": "a:b"}, 400),
                               ("clicks", [1], 400), ("bad name", {"entry": "a:b"}, 400),
                               ("clicks", {"entry": "no colon"}, 400),
                               ("clicks", {"entry": "a:b", "pyfiles": ["artifact:sha256:"
                                                                      + "0" * 64]}, 400)):
        s, b = await ahttp("PUT", c.url(0) + f"/pipelines/{name}", body)
        assert s == status and b["errors"], (name, body, s, b)
    s, b = await ahttp("GET", c.url(0) + "/pipelines/clicks")
    assert b["version"] == 3 and b["pending-version"] is None  # nothing changed
    (conf / "broken.json").write_text("{not json")
    rc, said, err = await jm("-a", c.url(0), "pipeline", "apply", str(conf / "broken.json"))
    assert rc != 0 and err.startswith("jm: ") and len(err.splitlines()) == 1, err
    rc, said, err = await jm("-a", c.url(0), "pipeline", "rollback", "clicks", "--to", "9")
    assert rc != 0 and "no version 9" in err and len(err.splitlines()) == 1, err
    s, b = await ahttp("GET", c.url(0) + "/pipelines")
    assert [(p["name"], p["version"]) for p in b["pipelines"]] == [("clicks", 3), ("daily", 1)]
    rc, said, err = await jm("-a", c.url(1), "pipeline", "delete", "clicks")
    assert rc == 0 and "clicks: deleted" in said, (said, err)

    async def cancelled():
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{v3['jobid']}")
        return b["state"] == "CANCELED"
    await apoll(cancelled, 30, what="the deleted pipeline's job cancelled")
    s, b = await ahttp("GET", c.url(0) + "/pipelines/clicks")
    assert s == 404 and b == {"errors": ["pipeline clicks not found"]}
