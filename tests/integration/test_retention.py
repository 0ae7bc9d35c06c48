"""Retention through real peers (real Raft, REST, job processes, the janitor): the files
of ended jobs go once the job store forgot them, while a running job keeps its files; a
job's log is capped; an unreferenced blob older than its grace period goes, a fresh one
and one a job uses stay; savepoints beyond the newest K per job go, pinned ones stay;
low free space is a warning in /healthz."""
import os
import time

from tests.conftest import running
from tests.integration.test_cli import jm
from tests.helpers import ahttp, apoll, asubmit_to, multipart

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
CAP = 16 * 1024
SETTINGS = {"jobstore.expiration-time": "1 s", "jobmanager.cleanup.interval": "200 ms",
            "jobmanager.blob.grace-period": "1 h", "state.savepoints.num-retained": 1,
            "jobmanager.job-log.max-size": "16 kb",
            "jobmanager.job-log.check-interval": "200 ms",
            "jobmanager.disk.min-free": "100%"}

CHATTY = b'''
def main(ctx):
    for i in range(5000):
        print("chatty line %05d %s" % (i, "x" * 80))
    print("done printing", flush=True)
    while not ctx.stop_requested.wait(0.05):
        pass
'''


async def job(c, jid, peer=0):
    s, b = await ahttp("GET", c.url(peer) + f"/jobs/{jid}")
    return b if s == 200 else None


async def wait_state(c, jid, *states, timeout=30):
    async def check():
        j = await job(c, jid)
        return j if j and j["state"] in states else None
    return await apoll(check, timeout, what=f"{jid} {states}")


async def upload(c, name, content):
    raw, ctype = multipart(name, content)
    s, b = await ahttp("POST", c.url(0) + "/artifacts", raw=raw,
                       headers={"Content-Type": ctype})
    assert s == 201, b
    return b


async def savepoint(c, jid, rid):
    s, b = await ahttp("POST", c.url(0) + f"/jobs/{jid}/savepoints", {"triggerId": rid})
    assert s == 202, b

    async def done():
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/savepoints/{rid}")
        return b["operation"]["location"] if b["status"]["id"] == "COMPLETED" else None
    loc = await apoll(done, 30, what=f"savepoint {rid}")
    assert loc, "the savepoint failed"
    return loc


def job_dirs(c, jid):
    """Every folder any peer (or the shared storage) holds for the job."""
    out = []
    for p in c.peers:
        out += [os.path.join(p.ground.data_dir, "jobs", jid),
                os.path.join(p.ground.log_dir, "jobs", jid)]
    out.append(os.path.join(c.peers[0].conf.path("high-availability.storageDir"), jid))
    return [d for d in out if os.path.exists(d)]


async def sweeps_after(c, n=2):
    """Every peer's janitor completed `n` more sweeps (so a deletion had its chance)."""
    start = [p.ground.janitor.sweeps for p in c.peers]
    await apoll(lambda: all(p.ground.janitor.sweeps >= s + n for p, s in zip(c.peers, start)), 30,
                what="janitor sweeps")


def age(path, seconds):
    old = time.time() - seconds
    for root, dirs, files in os.walk(path):
        for n in files + dirs:
            os.utime(os.path.join(root, n), (old, old))
    os.utime(path, (old, old))


async def test_janitor_keeps_what_live_jobs_need_and_deletes_the_rest(tmp_path):
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    async with running(str(tmp_path), 2, SETTINGS) as c:
        sp_dir = c.peers[0].conf.savepoints_dir()
        # /healthz: low free space is a warning (min-free 100%), the peer stays healthy
        s, h = await ahttp("GET", c.url(1) + "/healthz")
        assert s == 200 and h["ok"], h
        assert "jobmanager.disk.min-free" in (h["disk-low"] or ""), h
        # and every peer's warning is in GET /nodes on any peer (sent with its heartbeats)

        # (each peer answers from its own replica: a follower applies a heartbeat a little later)
        async def every_peer_low():
            for i in range(2):
                s, b = await ahttp("GET", c.url(i) + "/nodes")
                if not (s == 200 and len(b["nodes"]) == 2 and all(
                        "jobmanager.disk.min-free" in (n["disk-low"] or "") for n in b["nodes"])):
                    return False
            return True
        await apoll(every_peer_low, 30, what="both peers' disk-low in GET /nodes on both peers")
        rc, out, err = await jm("--address", c.url(1), "cluster")
        assert rc == 0, err
        assert sorted(ln.split(": ")[0] for ln in out.splitlines() if ln.startswith("disk low")) \
            == sorted(f"disk low on {p.node}" for p in c.peers), out

        # blobs: one a running job uses, one nobody uses (old), one nobody uses (fresh)
        used = await upload(c, "chatty.py", CHATTY)
        unused_old = await upload(c, "old.py", b"x = 1\n")
        unused_new = await upload(c, "new.py", b"y = 2\n")
        blob = {a["id"]: c.peers[0].ground.blobs.local_path(a["id"], a["name"])
                for a in (used, unused_old, unused_new)}
        chatty = await asubmit_to(c, {"entry": "chatty:main", "pyfiles": [used["pyfile"]]})
        await wait_state(c, chatty, "RUNNING")
        age(os.path.dirname(blob[used["id"]]), 7200)
        age(os.path.dirname(blob[unused_old["id"]]), 7200)
        shared_old = c.peers[0].ground.ha_blobs.local_path(unused_old["id"], unused_old["name"])
        age(os.path.dirname(shared_old), 7200)  # its copy in the shared storage too

        # savepoints of a streaming job: the 1st pinned by hand, the 2nd one a job resumes
        # from, the 3rd beyond the newest (num-retained 1), the 4th the newest
        t1 = await asubmit_to(c, {"entry": "jobs_fixture:ticker", "pyfiles": [FIX],
                              "job-type": "streaming", "args": {"output": str(out1)}})
        await wait_state(c, t1, "RUNNING")
        await apoll(lambda: os.path.isdir(out1) and len(os.listdir(out1)) >= 2, 30,
                    what="batches")
        sp1 = await savepoint(c, t1, "sp-1")
        open(os.path.join(sp1, "_pinned"), "w").close()
        sp2 = await savepoint(c, t1, "sp-2")
        t2 = await asubmit_to(c, {"entry": "jobs_fixture:ticker", "pyfiles": [FIX],
                                  "job-type": "streaming", "args": {"output": str(out2)},
                                  "savepoint-path": sp2})
        await wait_state(c, t2, "RUNNING")
        sp3 = await savepoint(c, t1, "sp-3")
        sp4 = await savepoint(c, t1, "sp-4")

        # jobs that end: their folders go once the job store forgot them
        quick = [await asubmit_to(c, {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
                 for _ in range(2)]
        s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{t1}?mode=cancel")
        assert s == 202, b
        ended = quick + [t1]
        for jid in ended:
            await wait_state(c, jid, "FINISHED", "CANCELED")
        assert all(job_dirs(c, j) for j in ended)  # they ran: they left folders
        assert os.path.isdir(os.path.join(c.peers[0].conf.path("high-availability.storageDir"),
                                          t1, "checkpoints"))

        async def forgotten():
            return all([await job(c, j) is None for j in ended])
        await apoll(forgotten, 60, what="the ended jobs purged")
        await apoll(lambda: not any(job_dirs(c, j) for j in ended), 30,
                    what="the ended jobs' folders deleted")
        await apoll(lambda: not os.path.exists(sp3), 30, what="savepoint 3 deleted")
        await apoll(lambda: not os.path.exists(blob[unused_old["id"]]), 30,
                    what="the old unused blob deleted")
        await apoll(lambda: not os.path.exists(shared_old), 30,
                    what="the old unused blob's shared copy deleted")
        # a job naming it now is refused with what to do, not accepted to fail later
        s, b = await ahttp("POST", c.url(0) + "/jobs",
                           {"entry": "old:main", "pyfiles": [unused_old["pyfile"]]})
        assert s == 400 and "was removed" in b["errors"][0] and "upload it again" in \
            b["errors"][0], b
        again = await upload(c, "old.py", b"x = 1\n")  # the same content again: usable
        assert again["id"] == unused_old["id"]
        s, b = await ahttp("POST", c.url(1) + "/jobs",
                           {"entry": "jobs_fixture:quick", "pyfiles": [FIX, again["pyfile"]]})
        assert s == 202, b
        await wait_state(c, b["jobid"], "FINISHED")
        await sweeps_after(c)

        # what live jobs need stays
        for jid in (chatty, t2):
            assert (await job(c, jid))["state"] == "RUNNING"
            assert job_dirs(c, jid), jid
        assert os.path.exists(blob[used["id"]])        # used by a running job
        assert os.path.exists(blob[unused_new["id"]])  # in its grace period
        for loc in (sp1, sp2, sp4):  # pinned, resumed from, the newest of t1
            assert os.path.exists(os.path.join(loc, "_metadata")), loc
        assert sorted(os.listdir(sp_dir)) == sorted(os.path.basename(p) for p in (sp1, sp2, sp4))
        assert os.listdir(out2)  # t2 runs on from its savepoint

        # the chatty job's log is capped, readable through REST, with its newest lines
        async def capped():
            s, b = await ahttp("GET", c.url(1) + f"/jobs/{chatty}/logs")
            return b if s == 200 and "done printing" in b["text"] and b["size"] <= CAP else None
        log = await apoll(capped, 30, what="the chatty job's log capped")
        assert "bytes of this log dropped here" in log["text"]
        assert "chatty line 00000" in log["text"]  # its start is kept
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{chatty}/logs?tail=1")
        assert s == 200 and b["text"] == "done printing\n"
        for jid in (chatty, t2):
            await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")


async def test_artifacts_no_job_names_are_forgotten_after_their_grace_period(tmp_path):
    """GET /artifacts (every peer) lists only what a job can use: an upload no job names
    is forgotten a grace period after it was last uploaded, with its files; one a job
    names stays; a job naming a forgotten one is refused with what to do."""
    settings = dict(SETTINGS, **{"jobmanager.blob.grace-period": "2 s",
                                 "jobstore.expiration-time": "1 h"})
    async with running(str(tmp_path), 2, settings) as c:
        unused = await upload(c, "unused.py", b"x = 1\n")

        # a job names `used` (on a busy machine the upload can age past the 2 s grace
        # before the job is in: then the refusal says to upload it again, as a user does)
        uploaded = []

        async def submitted():
            used = await upload(c, "used.py", b"y = 2\n")
            uploaded.append(time.time())
            s, b = await ahttp("POST", c.url(1) + "/jobs", {
                "entry": "jobs_fixture:sleepy", "pyfiles": [FIX, used["pyfile"]],
                "args": {"seconds": 600}})
            assert s == 202 or (s == 400 and "upload it" in b["errors"][0]), b
            return (used, b["jobid"]) if s == 202 else None
        used, jid = await apoll(submitted, 60, what="a job naming the used artifact")

        async def listed(peer):
            s, b = await ahttp("GET", c.url(peer) + "/artifacts")
            assert s == 200, b
            return {a["id"] for a in b["artifacts"]}

        async def unused_forgotten():
            return all([unused["id"] not in await listed(p) for p in (0, 1)])
        await apoll(unused_forgotten, 30, what="the unused artifact forgotten on every peer")
        await apoll(lambda: c.peers[0].ground.blobs.local_path(unused["id"], unused["name"]) is None
                    and c.peers[0].ground.ha_blobs.local_path(unused["id"], unused["name"]) is None,
                    30, what="its files deleted")
        await apoll(lambda: time.time() > uploaded[-1] + 3, 30, what="the grace period over")
        await sweeps_after(c)  # past its grace period too: a job names it
        assert all([used["id"] in await listed(p) for p in (0, 1)])
        assert (await job(c, jid))["state"] in ("CREATED", "RUNNING")

        s, b = await ahttp("POST", c.url(0) + "/jobs",
                           {"entry": "unused:main", "pyfiles": [unused["pyfile"]]})
        assert s == 400 and "unknown artifact" in b["errors"][0] \
            and "POST /artifacts" in b["errors"][0], b
        # the same content again: known again under its id (and forgotten again 2 s later:
        # the state machine's side of that is tests/unit/test_state.py)
        again = await upload(c, "unused.py", b"x = 1\n")
        assert again["id"] == unused["id"]
        await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
        await wait_state(c, jid, "CANCELED")


async def test_delete_an_artifact_no_job_names(tmp_path):
    """DELETE /artifacts/<id> (as Flink's DELETE /jars/<id>): forgotten on every peer at
    once; one a job names is a 409 naming the job; an unknown one a 404."""
    async with running(str(tmp_path), 2, SETTINGS) as c:
        unused = await upload(c, "unused.py", b"x = 1\n")
        used = await upload(c, "used.py", b"y = 2\n")
        s, b = await ahttp("POST", c.url(1) + "/jobs", {
            "entry": "jobs_fixture:sleepy", "pyfiles": [FIX, used["pyfile"]],
            "args": {"seconds": 600}})
        assert s == 202, b
        jid = b["jobid"]
        s, b = await ahttp("DELETE", c.url(1) + f"/artifacts/{unused['id']}")
        assert (s, b) == (200, {}), b
        for peer in (0, 1):
            s, b = await ahttp("GET", c.url(peer) + "/artifacts")
            assert [a["id"] for a in b["artifacts"]] == [used["id"]], b
        s, b = await ahttp("DELETE", c.url(0) + f"/artifacts/{unused['id']}")
        assert s == 404 and "unknown artifact" in b["errors"][0], b
        s, b = await ahttp("DELETE", c.url(0) + f"/artifacts/{used['id']}")
        assert s == 409 and jid in b["errors"][0], b
        s, b = await ahttp("DELETE", c.url(0) + "/artifacts/sha256:nope")
        assert s == 404, b
        s, b = await ahttp("POST", c.url(0) + "/jobs",
                           {"entry": "unused:main", "pyfiles": [unused["pyfile"]]})
        assert s == 400 and "unknown artifact" in b["errors"][0], b
        s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
        assert s == 202, b
        await wait_state(c, jid, "CANCELED")
