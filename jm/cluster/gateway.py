"""The REST gateway of a peer: what `rest/` may ask of it (the `Gateway` protocol in
rest/gateway.py), answered from the local replica or written through Raft.

Reads come from this peer's replica; writes are Raft commands acknowledged once applied
here. Failures leave as `ApiError`s with their HTTP status: a bad spec is 400, no
leader or an unknown outcome is 503 with Retry-After (RaftUnavailable)."""
from __future__ import annotations

import asyncio
import functools
import hashlib
import math
import os
import re
import time
import zipfile
from typing import Any, Optional

from jm.cluster.beats import parse_beat
from jm.cluster.blobs import BlobError, safe_name
from jm.cluster.joblists import JobLists
from jm.cluster.voting import PromotionRefused
from jm.policy.pages import DEFAULT_LIMIT
from jm.cluster.resourcemanager import rebalance_round, to_command
from jm.cluster import remotefs
from jm.cluster.savepoint import SavepointError, read_metadata
from jm.policy import fsuri
from jm.policy.spec import SpecError, SpecLimits, remote_refs, validate_spec
from jm.wire import livy, views
from jm.runtime import joblogs
from jm.config import ConfigError, parse_peer
from raft.artifacts import named_by
from raft.commands import (AddArtifact, AdmitPeer, CancelJob, DrainPeer, ForgetArtifacts,
                           RemovePeer, SubmitJob, TriggerSavepoint)
from raft.node import RaftUnavailable
from rest.gateway import MIN_INDEX_HEADER, ApiError


REMOTE_CHECK_TIMEOUT = 15.0  # seconds to open a remote file system or read a savepoint
REMOTE_FETCH_TIMEOUT = 120.0  # seconds to copy a job's remote application or py-file


def _api_errors(fn):
    """A gateway write's failures as HTTP errors: 400 for a bad spec, 503 (retry) when
    there is no leader or the write's outcome is unknown."""
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kw: Any) -> Any:
        try:
            return await fn(*args, **kw)
        except SpecError as exc:  # 400, or 413 for a spec over its byte limit
            raise ApiError(exc.status, *exc.errors)
        except UnicodeEncodeError:  # e.g. "\udcff" in JSON: Raft stores UTF-8 text only
            raise ApiError(400, "the request holds text that is not valid Unicode (a lone "
                                "surrogate such as \\udcff); send UTF-8 text")
        except RaftUnavailable as exc:
            raise ApiError(503, str(exc), headers={"Retry-After": "1"})
    return wrapper


class PeerGateway:
    """Implements rest.gateway.Gateway for one peer (the peer's parts are read through
    it, never changed, except by committing commands)."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer
        self.node = peer.node
        self.conf = peer.conf
        self.blobs = peer.blobs
        self.log_dir = peer.log_dir
        self.peer_headers = peer.peer_headers
        self.lists = JobLists(lambda: self.raft.read())

    raft = property(lambda self: self.peer.raft)
    lease = property(lambda self: self.peer.lease)
    spark = property(lambda self: self.peer.spark)
    executor = property(lambda self: self.peer.executor)
    submitter = property(lambda self: self.peer.submitter)
    sql = property(lambda self: self.peer.sql)
    registered = property(lambda self: self.peer.registered)

    @property
    def max_spec_size(self) -> int:
        """jobmanager.spec.max-size: REST refuses a larger job spec before reading it."""
        return self.conf["jobmanager.spec.max-size"]

    def lease_valid(self) -> bool:
        return self.peer.lease_valid()

    def spark_remote(self) -> Optional[str]:
        return self.peer.spark_remote()

    def _leader(self) -> Optional[str]:
        """The Raft leader as far as this peer can tell. An isolated pysyncobj follower
        keeps naming its last leader (it starts no election while connected to nobody),
        so a peer whose lease has run out knows no leader."""
        if self.lease is not None and self.lease.expired():
            return None
        return self.raft.leader() if self.raft else None

    def _writable(self) -> None:
        if not self.peer.started:  # REST is up before the peer's writers are
            raise RaftUnavailable("this peer is still starting; retry, or use another peer")
        if self._leader() is None:
            raise RaftUnavailable("no Raft leader reachable from this peer at the moment; "
                                  "retry, or use another peer")

    def applied_index(self) -> int:
        return self.raft.applied_index()

    async def wait_applied(self, index: int, timeout: float) -> bool:
        return await self.raft.wait_applied(index, timeout)

    def _max_slots(self) -> int:
        with self.raft.read() as st:
            return max([p.slots for p in st.peers.values()] + [self.conf["jobmanager.slots"]])

    @_api_errors
    async def submit_job(self, spec: Any, request_id: str, names: Optional[dict] = None
                         ) -> dict:
        """`names`: what the client calls the spec's fields, for its errors (Livy's)."""
        spec = validate_spec(spec, self._max_slots(), SpecLimits.from_conf(self.conf))
        self._writable()
        if request_id:  # a retry of a request this replica applied: its job, nothing read again
            with self.raft.read() as st:
                known = st.request_ids.get(request_id)
            if known is not None:
                return {"jobid": known}
        for field, uri in remote_refs(spec):  # copied once, as spark-submit downloads them
            ref = await self._remote_artifact((names or {}).get(field, field), uri)
            if spec.get("script") == uri:
                spec["script"] = ref
            spec["pyfiles"] = [ref if p == uri else p for p in spec["pyfiles"]]
        script = spec.get("script")
        if script and not script.startswith("artifact:"):
            problem = await asyncio.to_thread(script_problem, script)
            if problem:
                raise ApiError(400, f"script: {problem}")
        await self._known_artifacts([("pyfiles", p) for p in spec["pyfiles"]]
                                    + ([("script", script)] if script else []))
        if spec.get("savepoint-path"):
            await self._check_location(spec["savepoint-path"], "savepoint-path")
            try:
                await asyncio.wait_for(asyncio.to_thread(
                    read_metadata, spec["savepoint-path"], remotefs.options(self.conf)),
                    REMOTE_CHECK_TIMEOUT)
            except SavepointError as exc:
                raise ApiError(400, f"savepoint-path: {exc}")
            except asyncio.TimeoutError:
                raise ApiError(400, f"savepoint-path: {spec['savepoint-path']} could not be "
                                    f"read within {REMOTE_CHECK_TIMEOUT:.0f} s")
        res = await self.submitter.submit(SubmitJob(spec["jobid"], spec, time.time(), request_id))
        if not res.ok:
            raise ApiError(409 if res.code == "exists" else 400, res.error)
        return {"jobid": res.value["jobid"]}

    async def _known_artifacts(self, refs: list[tuple[str, str]]) -> None:
        """400 unless every `artifact:` reference (field, ref) is known. An id this replica
        does not know yet may have been acknowledged by another peer a moment ago: one
        barrier through the log settles it before the answer is no."""
        def missing() -> list[tuple[str, str]]:
            with self.raft.read() as st:
                return [(f, p) for f, p in refs
                        if p.startswith("artifact:") and p[len("artifact:"):] not in st.artifacts]
        if missing():
            await self.raft.barrier(self.conf["rest.write-timeout"])
            unknown = missing()
            if unknown:
                raise ApiError(400, *(f"{f}: unknown artifact {p}; upload it with "
                                      "POST /artifacts first" for f, p in unknown))
        removed = await asyncio.to_thread(self._removed_artifacts, refs)
        if removed:
            raise ApiError(400, *(f"{f}: artifact {p} was removed (no job referred to it "
                                  "for jobmanager.blob.grace-period); upload it again with "
                                  "POST /artifacts" for f, p in removed))

    def _removed_artifacts(self, refs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The known artifacts of `refs` whose content is gone from this peer and from the
        shared copy (the janitor removes unreferenced blobs after their grace period)."""
        with self.raft.read() as st:
            known = {p: st.artifacts.get(p[len("artifact:"):]) for _, p in refs
                     if p.startswith("artifact:")}
        return [(f, p) for f, p in refs if known.get(p) is not None
                and self.blobs.local_path(known[p].id, known[p].name) is None
                and self.peer.ha_blobs.local_path(known[p].id, known[p].name) is None]

    async def _write(self, command: Any) -> Any:
        """One Raft command for a REST write; refusals become 404/409/400."""
        self._writable()
        res = await self.raft.submit(command, self.conf["rest.write-timeout"])
        if not res.ok:
            raise ApiError({"not-found": 404, "conflict": 409}.get(res.code, 400), res.error)
        return res.value

    @_api_errors
    async def cancel_job(self, job_id: str) -> str:
        return await self._write(CancelJob(job_id, time.time()))

    async def _check_location(self, loc: str, field: str) -> None:
        """400 unless this peer can open the remote file system of `loc` (pyarrow.fs with
        the peer's s3.* settings; hdfs:// needs a Hadoop client)."""
        if not fsuri.is_remote(loc):
            return
        try:
            problem = await asyncio.wait_for(asyncio.to_thread(
                remotefs.problem, loc, remotefs.options(self.conf)), REMOTE_CHECK_TIMEOUT)
        except asyncio.TimeoutError:
            problem = f"its file system did not open within {REMOTE_CHECK_TIMEOUT:.0f} s"
        if problem:
            raise ApiError(400, f"{field} {loc}: {problem}")

    @_api_errors
    async def trigger_savepoint(self, job_id: str, trigger_id: str, target: Optional[str],
                                stop: bool) -> dict:
        if target is not None:
            try:  # "/a", "file:///a", "s3a://bucket/a" ... -> one canonical spelling
                target = fsuri.location(target, "target-directory")
            except ValueError as exc:
                raise ApiError(400, str(exc))
            await self._check_location(target, "target-directory")
        out = await self._write(TriggerSavepoint(job_id, trigger_id, target, stop, time.time()))
        return {"request-id": out["request-id"]}

    @_api_errors
    async def drain_node(self, node: str, drain: bool, deadline: Optional[float] = None
                         ) -> dict:
        jobs = await self._write(DrainPeer(node, drain, time.time(), deadline))
        with self.raft.read() as st:
            state = views.peer_state(st, st.peers[node])
        return {"node": node, "state": state, "jobs": jobs}

    # ---- membership (jm/cluster/membership.py, raft/members.py) ------------------------
    @_api_errors
    async def members(self) -> dict:
        """The Raft members, with their roles, after a Raft barrier: every committed
        change is in (a starting peer asks this to learn whether it is a member)."""
        await self.raft.barrier(self.conf["rest.write-timeout"])
        leader = self._leader()
        members = self.raft.members()
        with self.raft.read() as st:
            pending = views.membership_pending(st, members)
            readers = views.non_voters(st, members)
            removed = sorted(st.removed)
            cluster_id = st.cluster_id
        return {"leader": leader, "cluster-id": cluster_id, "members": [
            {"id": m, "role": "leader" if m == leader else "follower", "self": m == self.node}
            for m in members],
            "non-voters": [dict(r, self=r["id"] == self.node) for r in readers],
            "voters-target": self.peer.voters_target, "pending": pending, "removed": removed}

    @_api_errors
    async def promote_peer(self, node: str) -> dict:
        """POST /cluster/peers/{node}/promote: a non-voting member becomes a voter
        (jm/cluster/voting.py): 409 if the core is full or it is not caught up."""
        self._writable()
        try:
            return await self.peer.voting.promote(node)
        except PromotionRefused as exc:
            raise ApiError(exc.status, str(exc))

    async def prepare_voter(self, body: Any) -> dict:
        """POST /cluster/voter (peers only): start this peer's voting node."""
        voters = body.get("voters") if isinstance(body, dict) else None
        if not isinstance(voters, list) or not voters or \
                not all(isinstance(v, str) for v in voters):
            raise ApiError(400, 'the body must be {"voters": ["HOST:RAFT-PORT", ...]}')
        try:
            applied = self.peer.candidate.begin(voters)
        except ValueError as exc:
            raise ApiError(409, str(exc))
        return {"node": self.node, "applied": applied}

    async def abandon_voter(self) -> dict:
        """DELETE /cluster/voter (peers only): stop a voting node not added after all."""
        return {"node": self.node, "abandoned": self.peer.candidate.abandon()}

    @_api_errors
    async def beat(self, body: Any) -> dict:
        """POST /cluster/beat on the leader: a peer's heartbeat, answered once the lease
        round holding it is committed (jm/cluster/beats.py); 503 if this is not the
        leader (the peer asks the new one)."""
        try:
            hb, urgent = parse_beat(body)
        except ValueError as exc:
            raise ApiError(400, str(exc))
        rounds = self.peer.rounds
        if rounds is None:
            raise RaftUnavailable("this peer is still starting")
        res = await rounds.accept(hb, urgent)
        # the round is applied here: the sender renews only once its replica has too
        return {"ok": res.ok, "code": res.code, "error": res.error,
                "index": self.raft.applied_index()}

    async def livy_submit(self, body: Any, request_id: str) -> dict:
        """POST /batches: a Livy batch request as a script job (jm/wire/livy.py)."""
        try:
            spec = livy.batch_spec(body)
        except ValueError as exc:
            raise ApiError(400, *exc.args[0])
        out = await self.submit_job(spec, request_id, livy.FIELD_NAMES)
        with self.raft.read() as st:
            job = st.jobs.get(out["jobid"])
            if job is None:  # applied here before the answer: never; purged at once: gone
                raise ApiError(404, f"batch of job {out['jobid']} is gone already")
            return livy.batch(job)

    async def _remote_artifact(self, field: str, uri: str) -> str:
        """A remote file (s3://, gs://, hdfs://) copied into the cluster's artifacts ->
        `artifact:<id>`; 400 if it cannot be read, 413 beyond rest.max-body-size."""
        limit = self.conf["rest.max-body-size"]
        try:
            data = await asyncio.wait_for(asyncio.to_thread(
                remotefs.read_bytes, uri, remotefs.options(self.conf), limit),
                REMOTE_FETCH_TIMEOUT)
        except remotefs.TooLarge as exc:
            raise ApiError(413, f"{field}: {exc}")
        except remotefs.RemoteError as exc:
            raise ApiError(400, f"{field}: {exc}")
        except asyncio.TimeoutError:
            raise ApiError(400, f"{field} {uri} could not be read within "
                                f"{REMOTE_FETCH_TIMEOUT:.0f} s")
        art = await self.add_artifact(uri.rsplit("/", 1)[-1], data)
        return art["pyfile"]

    async def livy_log(self, job_id: str, start: Optional[int], size: Optional[int]) -> dict:
        """A batch's log lines, Livy's way (the last 100 by default)."""
        try:
            text = (await self.job_logs(job_id, None, 0, None, False)).get("text") or ""
        except ApiError as exc:
            if exc.status != 404:  # 404: it has not run yet, no log
                raise
            text = ""
        first, total, lines = livy.log_page(text, start, size)
        return {"from": first, "total": total, "log": lines}

    def identity(self) -> dict:
        """What this replica knows of the cluster, without a leader (a starting peer whose
        Raft data is missing asks this: jm/policy/identity.py): its id and the peers
        registered in it (not removed)."""
        with self.raft.read() as st:
            return {"cluster-id": st.cluster_id, "node": self.node,
                    "known": sorted(st.peers), "applied-index": self.raft.applied_index()}

    @_api_errors
    async def add_peer(self, peer: str) -> dict:
        """Admit the peer in the state as a non-voting member (committed before the
        answer); once it runs, the leader promotes it if the voting core is short."""
        try:
            addr = parse_peer(peer, "peer")
        except ConfigError as exc:
            raise ApiError(400, str(exc))
        node = addr.node_id
        with self.raft.read() as st:
            known = node in st.peers or node in st.joining
        if node in self.raft.members() or known:
            raise ApiError(409, f"{node} is a member already")
        self._writable()
        with self.raft.read() as st:
            ports = {addr.rest_port, addr.raft_port}
            taken = [p.id for p in st.peers.values()
                     if p.host == addr.host and ports & {p.rest_port, p.raft_port}]
        if taken:
            raise ApiError(409, f"{peer} uses a port of peer {taken[0]}")
        res = await self.raft.submit(AdmitPeer(str(addr), time.time(), False),
                                     self.conf["rest.write-timeout"])
        if not res.ok:
            raise ApiError(409, res.error)
        # a non-voting member first: the leader promotes it once it runs, if the voting
        # core is short of raft.voters (jm/cluster/voting.py)
        return {"id": node, "peer": str(addr), "role": "non-voter",
                "members": self.raft.members(), "next": f"bin/jobmanager.sh start {addr}"}

    @_api_errors
    async def remove_peer(self, node: str, deadline: Optional[float]) -> dict:
        """A live peer drains and leaves; a dead or never started one leaves at once."""
        if node.count(":") == 2:  # HOST:REST-PORT:RAFT-PORT
            try:
                node = parse_peer(node, "peer").node_id
            except ConfigError as exc:
                raise ApiError(400, str(exc))
        members = self.raft.members()
        with self.raft.read() as st:
            known = node in st.peers or node in st.joining
        if node not in members and not known:
            raise ApiError(404, f"{node} is not a member of the cluster")
        if members == [node]:
            raise ApiError(409, f"{node} is the last member; stop the cluster instead")
        res = await self._write(RemovePeer(node, time.time(), deadline))
        return {"node": node, "state": res["state"], "jobs": res["jobs"]}

    @_api_errors
    async def rebalance(self) -> dict:
        """One rebalance round now, planned from this peer's replica (the state machine
        re-checks every move when it commits)."""
        self._writable()
        with self.raft.read() as st:
            moves = rebalance_round(st, self.conf["rebalance.threshold"],
                                    self.conf["rebalance.max-moves-per-round"])
        planned = [{"job": m.job_id, "from": m.source, "to": m.target} for m in moves]
        if not moves:
            return {"moves": [], "refused": []}
        res = await self.raft.submit(to_command(moves, "rebalance", time.time()),
                                     self.conf["rest.write-timeout"])
        done = [p for p, r in zip(planned, res.value) if r.ok]
        refused = [dict(p, reason=r.error) for p, r in zip(planned, res.value) if not r.ok]
        return {"moves": done, "refused": refused}

    @_api_errors
    async def add_artifact(self, filename: str, data: bytes) -> dict:
        self._writable()
        try:
            name = safe_name(filename)
            art_id = "sha256:" + hashlib.sha256(data).hexdigest()
            with self.raft.read() as st:
                known = st.artifacts.get(art_id)
            # one name per content: keep the cluster's, so every peer imports it alike
            art_id, name = self.blobs.put(known.name if known else name, data)
        except BlobError as exc:
            raise ApiError(400, str(exc))
        # acknowledged only once a second copy is on disk in the storage every peer shares
        # (high-availability.storageDir): a peer that loses its disk loses no artifact
        try:
            await asyncio.to_thread(self.peer.ha_blobs.put, name, data, True)
        except OSError as exc:
            raise ApiError(503, f"the artifact could not be stored in "
                                f"high-availability.storageDir: {exc}",
                           headers={"Retry-After": "1"})
        res = await self.raft.submit(AddArtifact(art_id, name, len(data), self.node, time.time()),
                                     self.conf["rest.write-timeout"])
        if not res.ok:
            raise ApiError(400, res.error)
        return {"id": art_id, "name": name, "size": len(data), "pyfile": f"artifact:{art_id}"}

    @_api_errors
    async def delete_artifact(self, artifact_id: str) -> dict:
        """Forget an artifact no job names (Flink's DELETE /jars/<id>): 404 unknown, 409
        named by a job. Its files go as an unused upload's do (the janitor, after
        jobmanager.blob.grace-period), so an upload of the same bytes racing the delete
        keeps them."""
        self._writable()

        def naming() -> Optional[list[str]]:  # None: unknown
            with self.raft.read() as st:
                if artifact_id not in st.artifacts:
                    return None
                return [j.id for j in st.jobs.values() if artifact_id in named_by(j.spec)]
        jobs = naming()
        if jobs is None:
            await self.raft.barrier(self.conf["rest.write-timeout"])
            jobs = naming()
            if jobs is None:
                raise ApiError(404, f"unknown artifact {artifact_id}")
        if not jobs:
            res = await self.raft.submit(ForgetArtifacts((artifact_id,), math.inf, time.time()),
                                         self.conf["rest.write-timeout"])
            if res.ok and res.value:
                return {}
            jobs = naming()  # meanwhile: named by a new job, or forgotten by another delete
            if jobs is None:
                raise ApiError(404, f"unknown artifact {artifact_id}")
        raise ApiError(409, f"artifact {artifact_id} is named by job(s) "
                            f"{', '.join(jobs[:5])}; it is kept while they are in the job store")

    def artifact_file(self, artifact_id: str) -> Optional[str]:
        with self.raft.read() as st:
            art = st.artifacts.get(artifact_id)
        if art is None:
            return None
        try:
            return self.blobs.local_path(artifact_id, art.name)
        except BlobError:
            return None

    def list_page(self, name: str, query: Any) -> dict:
        """A page of a list route: jobs (newest first, DEFAULT_LIMIT by default), peers
        (all by default), artifacts (DEFAULT_LIMIT); 400 for a parameter out of range."""
        if name == "jobs":
            return self.lists.jobs_page(query)
        out = self.view(name)
        return {**out, **self.lists.page(query, name, out[name],
                                         None if name == "nodes" else DEFAULT_LIMIT)}

    async def jobs_overview(self, query: Any, id_ok: Any = None) -> list[bytes]:
        return await self.lists.overview(query, id_ok)

    def view(self, name: str, *args: Any) -> Any:
        now = time.time()
        leader = self._leader()
        with self.raft.read() as st:
            if name == "overview":
                return views.overview(st, leader)
            if name == "nodes":
                return views.nodes(st, leader, self.raft.members())
            if name == "artifacts":
                return views.artifacts(st)
            if name == "livy-version":
                return {"version": livy.VERSION, "gitCommit": "", "user": "", "url": "",
                        "branch": "", "date": ""}
            if name == "livy-batches":
                return livy.batches(list(st.jobs.values()), *args)
            if name == "livy-batch":  # by number; -> (job id, the batch) or None
                job = st.jobs.get(st.by_number.get(args[0], ""))
                return (job.id, livy.batch(job)) if job is not None else None
            job = st.jobs.get(args[0]) if args else None
            if job is None:
                return None
            if name == "job":
                return views.job_detail(job, now)
            if name == "exceptions":
                return views.job_exceptions(job)
            if name == "result":
                return views.job_result(job)
            if name == "savepoints":
                return views.job_savepoints(job)
            if name == "savepoint":
                return views.savepoint_status(job, args[1])
        raise KeyError(name)

    @_api_errors
    async def job_logs(self, job_id: str, attempt: Optional[int], offset: int,
                       tail: Optional[int], local: bool) -> dict:
        """An attempt's log, read here or fetched from the peer that ran the attempt."""
        with self.raft.read() as st:
            job = st.jobs.get(job_id)
            if job is None:
                raise ApiError(404, f"job {job_id} not found")
            if not job.attempts:
                raise ApiError(404, f"job {job_id} has not run yet; it has no logs")
            attempt = attempt or job.attempts[-1].epoch
            rec = next((a for a in job.attempts if a.epoch == attempt), None)
            if rec is None:
                raise ApiError(404, f"job {job_id} has no attempt {attempt} (attempts "
                                    f"1-{job.attempts[-1].epoch})")
            peer = st.peers.get(rec.node)
            url = self.peer.url_of(peer.host, peer.rest_port) if peer else None
        out = {"job": job_id, "attempt": attempt, "node": rec.node, "ended": rec.end is not None}
        if rec.node == self.node:
            files = joblogs.attempt_files(self.log_dir, job_id, attempt)
            out.update(joblogs.read(files, offset, tail))
            return out
        if local or url is None:
            raise ApiError(404, f"the logs of attempt {attempt} are on peer {rec.node}")
        import aiohttp
        query = {"attempt": str(attempt), "local": "1"}
        if tail is not None:
            query["tail"] = str(tail)
        else:
            query["offset"] = str(offset)
        # the attempt's peer may not have applied the attempt we read yet: it answers once
        # it has (X-JM-Min-Index), never a 404 for a job it has not heard of
        headers = {MIN_INDEX_HEADER: str(self.raft.applied_index())}
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10),
                                             headers=self.peer_headers) as session:
                async with session.get(f"{url}/jobs/{job_id}/logs", params=query,
                                       headers=headers, ssl=self.peer.client_ssl) as resp:
                    body = await resp.json(content_type=None)
                    if resp.status != 200:
                        errors = body.get("errors") if isinstance(body, dict) else None
                        raise ApiError(resp.status if resp.status in (400, 401, 404) else 503,
                                       *(errors or [f"peer {rec.node}: HTTP {resp.status}"]),
                                       headers={"Retry-After": resp.headers.get("Retry-After",
                                                                                "1")})
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError) as exc:
            raise ApiError(503, f"the logs of attempt {attempt} are on peer {rec.node}, "
                                f"which did not answer: {exc or type(exc).__name__}",
                           headers={"Retry-After": "1"})
        return body

    def gauges(self) -> dict:
        """Prometheus gauges, read at scrape time (jm.cluster.metrics): this peer's own
        (labelled with the peer by PeerMetrics), and the cluster-wide jm_cluster_* ones
        only if this peer is the leader (a follower exports none: sum() over peers is
        right)."""
        from jm.cluster.metrics import cluster_gauges
        leader = self._leader()
        with self.raft.read() as st:
            cluster = cluster_gauges(st) if leader == self.node else {}
            used = st.slots_used(self.node)
            mine = len(st.jobs_of(self.node))
        sync = self.raft.syncobj
        spark_up = (self.spark.ready.is_set() if self.spark else
                    bool(self.conf["spark.remote"]))
        journal = self.raft.journal_stats()
        snap = self.raft.snapshot_stats()
        disk = []
        for kind, where in (("data", self.peer.data_dir), ("log", self.peer.log_dir)):
            try:
                fs = os.statvfs(where)
            except OSError:
                continue
            disk.append((kind, fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize))
        janitor = getattr(self.peer, "janitor", None)
        return {
            **cluster,
            "jm_raft_term": ("Raft term of this peer's replica", (), [((), sync.raftCurrentTerm)]),
            "jm_raft_commit_index": ("Raft commit index of this peer's replica", (),
                                     [((), sync.raftCommitIndex)]),
            "jm_raft_last_applied": ("Raft entries applied here", (), [((), sync.raftLastApplied)]),
            "jm_raft_leader": ("1 if this peer is the Raft leader", (),
                               [((), 1 if leader == self.node else 0)]),
            "jm_raft_disk_problem": ("1 if this peer's Raft journal cannot be written", (),
                                     [((), 0 if self.raft.disk_trouble() is None else 1)]),
            "jm_job_processes": ("Job processes alive on this peer", (),
                                 [((), self.executor.running())]),
            "jm_jobs_assigned": ("Jobs assigned to this peer", (), [((), mine)]),
            "jm_slots_used": ("Slots used on this peer (with moves on their way)", (),
                              [((), used)]),
            "jm_slots": ("Slots of this peer", (), [((), self.conf["jobmanager.slots"])]),
            "jm_spark_connect_up": ("1 if this peer's Spark Connect is ready", (),
                                    [((), 1 if spark_up else 0)]),
            "jm_lease_valid": ("1 if this peer holds a valid lease", (),
                               [((), 1 if self.lease_valid() else 0)]),
            "jm_disk_free_bytes": ("Room left for this peer on the file system of its data "
                                   "or log folder", ("dir",), [((k,), f) for k, f, _ in disk]),
            "jm_disk_size_bytes": ("Size of the file system of this peer's data or log folder",
                                   ("dir",), [((k,), t) for k, _, t in disk]),
            "jm_disk_low": ("1 if the data or log folder has less room than "
                            "jobmanager.disk.min-free", (),
                            [((), 1 if janitor is not None and janitor.disk_low() else 0)]),
            "jm_raft_fsyncs_total": ("fsyncs of this peer's Raft journal (raft.fsync)", (),
                                     [((), journal.get("fsyncs", 0))]),
            "jm_raft_fsynced_entries_total": ("Raft entries those fsyncs made durable", (),
                                              [((), journal.get("entries", 0))]),
            "jm_raft_fsync_seconds_total": ("Time spent in those fsyncs", (),
                                            [((), journal.get("fsync-seconds", 0.0))]),
            "jm_raft_snapshots_total": ("Snapshots of the Raft log this peer wrote", (),
                                        [((), snap.taken)]),
            "jm_raft_snapshot_seconds": ("The last snapshot: from its start until written",
                                         (), [((), snap.seconds)]),
            "jm_raft_snapshot_start_seconds": ("The last snapshot: its start on the Raft "
                                               "thread (the fork)", (),
                                               [((), snap.start_seconds)]),
        }

    def readiness(self) -> dict:
        registered = self.registered.is_set()
        lease = bool(self.peer.lease_valid())
        started = bool(self.peer.started)
        why = [w for w, bad in (("not started", not started), ("not registered", not registered),
                                ("lease not valid", not lease)) if bad]
        return {"ready": not why, "node": self.node, "registered": registered,
                "lease-valid": lease, "started": started, "reasons": why}

    def health(self) -> dict:
        leader = self._leader()
        disk = self.raft.disk_trouble() if self.raft else None
        try:
            st = os.statvfs(self.peer.data_dir)
            free: Optional[int] = st.f_bavail * st.f_frsize
        except OSError:
            free = None
        return {"ok": leader is not None and self.registered.is_set() and disk is None,
                "node": self.node, "leader": leader, "registered": self.registered.is_set(),
                "spark-ready": bool(self.spark and self.spark.ready.is_set()),
                "spark-remote": _no_token(self.spark_remote()), "disk-problem": disk,
                "disk-free": free}


def _no_token(remote: Optional[str]) -> Optional[str]:
    """A Spark Connect URL as it may be shown: its `token` parameter hidden."""
    return remote and re.sub(r";token=[^;]*", ";token=(hidden)", remote)


def script_problem(path: str) -> Optional[str]:
    """Why a script path given at submission cannot run (checked on the receiving peer;
    every peer must be able to read it), or None."""
    if not os.path.isfile(path):
        return f"{path} is not a file on the peer that received the job"
    if not os.access(path, os.R_OK):
        return f"{path} is not readable"
    if path.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as z:
                if "__main__.py" not in z.namelist():
                    return f"{path} has no __main__.py at its top level"
        except (OSError, zipfile.BadZipFile) as exc:
            return f"{path} is not a readable zip file: {exc}"
    return None
