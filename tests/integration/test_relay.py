"""Submissions relayed to the leader's group commit (raft/relay.py, jm/cluster/submitroute.py),
on real in-process peers over real Raft: a follower's job goes into the leader's batch (no
Raft write of the follower's own), its answer comes once the follower has applied it (a
read there without any index sees the job), a retry with the request id gets the same
job; concurrent submissions to every peer share the leader's entries; a cluster held at an
older protocol writes a follower's batch itself, as before."""
import asyncio

from prometheus_client.parser import text_string_to_metric_families as parse_text

from tests.conftest import running
from tests.helpers import ahttp, apoll

JOB = {"entry": "m:f"}  # (never runs: the tests look at the submission alone)
NO_WAIT = {"X-JM-Min-Index": "0"}  # a read answered from the peer's replica as it is


async def roles(c) -> tuple[int, list[int]]:
    async def leader():
        views = [(await ahttp("GET", u + "/healthz"))[1] for u in c.urls]
        leads = {v.get("leader") for v in views}
        if len(leads) != 1 or None in leads:
            return None
        return [i for i, v in enumerate(views) if v["node"] == v["leader"]]
    lead = (await apoll(leader, 30, what="one leader seen by every peer"))[0]
    return lead, [i for i in range(len(c.urls)) if i != lead]


async def writes(url: str) -> dict:
    """This peer's Raft writes so far: {(command, role): count}."""
    s, text = await ahttp("GET", url + "/metrics")
    assert s == 200
    return {(x.labels["command"], x.labels["role"]): x.value
            for fam in parse_text(text) for x in fam.samples
            if x.name == "jm_raft_write_seconds_count"}


async def test_a_followers_submission_goes_into_the_leaders_batch(tmp_path):
    async with running(str(tmp_path), 3, {"jobmanager.slots": 1}) as c:
        lead, followers = await roles(c)
        f = followers[0]
        before_f, before_l = await writes(c.url(f)), await writes(c.url(lead))
        s, b = await ahttp("POST", c.url(f) + "/jobs", dict(JOB, name="relayed"),
                           {"X-Request-Id": "relay-1"})
        assert s == 202, b
        jid = b["jobid"]
        # acknowledged once applied on the follower itself: read there, no index asked
        s, job = await ahttp("GET", c.url(f) + f"/jobs/{jid}", headers=NO_WAIT)
        assert s == 200 and job["name"] == "relayed", job
        after_f, after_l = await writes(c.url(f)), await writes(c.url(lead))

        def grew(after, before, key):
            return after.get(key, 0) - before.get(key, 0)
        assert grew(after_f, before_f, ("SubmitJob", "follower")) == 1  # relayed
        assert grew(after_f, before_f, ("SubmitJobs", "follower")) == 0  # no batch of its own
        assert grew(after_l, before_l, ("SubmitJobs", "leader")) == 1  # the leader's batch
        # a retry of the request (the answer was lost): the same job, nothing written
        s, again = await ahttp("POST", c.url(f) + "/jobs", dict(JOB, name="relayed"),
                               {"X-Request-Id": "relay-1"})
        assert s == 202 and again["jobid"] == jid
        assert (await writes(c.url(lead))).get(("SubmitJobs", "leader")) == \
            after_l[("SubmitJobs", "leader")]


async def test_concurrent_submissions_to_every_peer_share_the_leaders_entries(tmp_path):
    async with running(str(tmp_path), 3, {"jobmanager.slots": 1}) as c:
        lead, followers = await roles(c)
        before = [await writes(u) for u in c.urls]
        n = 60

        async def submit(i):
            return await ahttp("POST", c.url(i % 3) + "/jobs", dict(JOB, name=f"j{i}"),
                               {"X-Request-Id": f"many-{i}"})
        answers = await asyncio.gather(*(submit(i) for i in range(n)))
        assert all(s == 202 for s, _ in answers), answers
        ids = {b["jobid"] for _, b in answers}
        assert len(ids) == n
        for i in range(3):  # every peer answered only once it had its jobs
            for k in range(i, n, 3):
                s, _ = await ahttp("GET", c.url(i) + f"/jobs/{answers[k][1]['jobid']}",
                                   headers=NO_WAIT)
                assert s == 200
        after = [await writes(u) for u in c.urls]
        batches = sum(a.get(("SubmitJobs", r), 0) - b.get(("SubmitJobs", r), 0)
                      for a, b in zip(after, before) for r in ("leader", "follower"))
        relayed = sum(a.get(("SubmitJob", "follower"), 0) - b.get(("SubmitJob", "follower"), 0)
                      for a, b in zip(after, before))
        assert relayed == 2 * n // 3  # every follower's submission was relayed
        assert 1 <= batches < n // 3  # only the leader wrote, many jobs an entry
        for i in followers:
            assert after[i].get(("SubmitJobs", "follower"), 0) == \
                before[i].get(("SubmitJobs", "follower"), 0)


async def test_a_cluster_held_at_an_older_protocol_does_not_relay(tmp_path):
    # (cluster.protocol-version 7: a build before relays; an older peer would refuse the
    # relay message and drop the connection)
    async with running(str(tmp_path), 3, {"jobmanager.slots": 1,
                                          "cluster.protocol-version": 7}) as c:
        lead, followers = await roles(c)
        f = followers[0]
        before = await writes(c.url(f))
        s, b = await ahttp("POST", c.url(f) + "/jobs", JOB)
        assert s == 202, b
        s, _ = await ahttp("GET", c.url(f) + f"/jobs/{b['jobid']}", headers=NO_WAIT)
        assert s == 200
        after = await writes(c.url(f))
        assert after.get(("SubmitJobs", "follower"), 0) - \
            before.get(("SubmitJobs", "follower"), 0) == 1
        assert after.get(("SubmitJob", "follower"), 0) == before.get(("SubmitJob", "follower"), 0)


async def test_relayed_submissions_outlive_the_leader(tmp_path):
    # the leader stops while followers' relayed jobs wait in its batch: they are sent to
    # the next leader (an old leader's copy that was committed is refused there as a job
    # that exists, the first one stands); every answer is an accepted job that exists or
    # a 503 (no leader, or not committed in time), never another error or a lost job
    async with running(str(tmp_path), 3, {"jobmanager.slots": 1}) as c:
        lead, followers = await roles(c)
        answers: list = []
        stop = asyncio.Event()

        async def client(k):
            i = 0
            while not stop.is_set():
                f = followers[(k + i) % 2]
                s, b = await ahttp("POST", c.url(f) + "/jobs", dict(JOB, name=f"c{k}-{i}"),
                                   {"X-Request-Id": f"failover-{k}-{i}"}, timeout=30)
                answers.append((f, s, b))
                i += 1
        clients = [asyncio.create_task(client(k)) for k in range(8)]
        await apoll(lambda: len(answers) >= 40, 30, what="submissions before the stop")
        await c.peers[lead].stop()
        cut = len(answers)

        async def new_leader():
            views = [(await ahttp("GET", c.url(i) + "/healthz"))[1] for i in followers]
            leads = {v.get("leader") for v in views}
            return len(leads) == 1 and None not in leads
        await apoll(new_leader, 30, what="a new leader")
        await apoll(lambda: sum(1 for _, s, _ in answers[cut:] if s == 202) >= 40, 30,
                    what="jobs accepted after the stop")
        stop.set()
        await asyncio.gather(*clients)
        assert {s for _, s, _ in answers} <= {202, 503}, \
            [a for a in answers if a[1] not in (202, 503)][:3]
        accepted = [(f, b["jobid"]) for f, s, b in answers if s == 202]
        assert len({j for _, j in accepted}) == len(accepted)
        for f, jid in accepted:  # on the peer that answered, and on the other one
            for i in followers:
                s, _ = await ahttp("GET", c.url(i) + f"/jobs/{jid}")
                assert s == 200, (jid, i, f)
