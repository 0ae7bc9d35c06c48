"""The peer's cache of per-job Python environments (jm/cluster/jobs/envs.py) with real pip from
the index this machine reaches: one build per set however many ask at once, an
environment over the peer's (its pyspark stays), two versions of one package side by
side, pip's own error for a set that cannot be built, and the least recently used
environment not in use deleted when the cache is over its bound."""
import asyncio
import json
import os
import subprocess

import pytest

from jm.cluster.jobs.envs import READY, EnvBuildError, EnvCache
from jm.policy.jobs.envs import requirement_set

OLD, NEW = "tabulate==0.8.10", "tabulate==0.9.0"  # small, pure Python, not the peer's


def _run(env, code: str) -> str:
    return subprocess.run([env.python, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


class CountingCache(EnvCache):
    builds = 0

    async def _build(self, key, reqs):
        self.builds += 1
        await super()._build(key, reqs)


async def test_one_build_per_set_over_the_peer_s_environment(tmp_path):
    cache = CountingCache(str(tmp_path / "envs"), 1 << 40)
    old = requirement_set([OLD])
    a, b = await asyncio.gather(cache.acquire(old), cache.acquire(old))
    assert a == b and cache.builds == 1 and cache.in_use(a.key) == 2
    assert _run(a, "import tabulate; print(tabulate.__version__)") == "0.8.10"
    # the peer's own packages stay: pyspark is not in the environment, yet imports
    peer = _run(a, "import pyspark, jm; print(pyspark.__file__, jm.__file__)")
    assert not peer.startswith(a.path) and str(tmp_path) not in peer, peer
    assert not [n for n in os.listdir(a.site) if n.lower().startswith("pyspark")]
    new = await cache.acquire(requirement_set([NEW]))
    assert new.key != a.key and cache.builds == 2
    assert _run(new, "import tabulate; print(tabulate.__version__)") == "0.9.0"
    assert _run(a, "import tabulate; print(tabulate.__version__)") == "0.8.10"
    again = await cache.acquire(requirement_set(["Tabulate == 0.8.10"]))  # the same set
    assert again == a and cache.builds == 2
    # readable by the jobs' users whatever the peer's umask
    assert os.stat(os.path.join(a.site, "_jm_peer.pth")).st_mode & 0o004


async def test_a_set_pip_cannot_build_fails_with_pip_s_error_and_leaves_nothing(tmp_path):
    cache = EnvCache(str(tmp_path / "envs"), 1 << 40)
    bad = requirement_set(["jm-no-such-package-for-tests==1.0"])
    with pytest.raises(EnvBuildError) as exc:
        await cache.acquire(bad)
    assert str(exc.value).startswith("pip: ERROR:") and \
        "jm-no-such-package-for-tests" in str(exc.value), exc.value
    assert os.listdir(tmp_path / "envs") == [] and cache.in_use(bad.key("3.11")) == 0
    # a requirement that would need another pyspark than the peer's fails the same way
    with pytest.raises(EnvBuildError, match="pyspark"):
        await cache.acquire(requirement_set(["delta-spark==3.2.0"]))


async def test_the_least_recently_used_environment_not_in_use_makes_room(tmp_path):
    clock = [1000.0]
    cache = EnvCache(str(tmp_path / "envs"), 1, clock=lambda: clock[0])  # (over at once)
    old = await cache.acquire(requirement_set([OLD]))
    clock[0] += 10
    new = await cache.acquire(requirement_set([NEW]))
    assert os.path.exists(os.path.join(old.path, READY))  # in use: kept, over the bound
    cache.release(old)
    assert await cache.make_room() == [old.key]
    assert not os.path.exists(old.path) and os.path.exists(os.path.join(new.path, READY))
    cache.release(new)
    assert await cache.make_room() == [new.key]


async def test_jobs_run_with_their_own_requirements_side_by_side(tmp_path):
    """Two jobs with two versions of one package at once on one peer each import theirs;
    one whose requirement replaces a module the zygote imported (six) runs in a fresh
    interpreter of its environment; a set pip cannot build fails the job at once, with
    pip's error, its restart strategy untouched; a bad requirement is a 400."""
    from tests.conftest import running
    from tests.helpers import aended, ahttp, asubmit
    fix = os.path.dirname(os.path.abspath(__file__)) + "/"
    job = {"entry": "envs_jobs:versions", "pyfiles": [fix]}

    # (the zygote imports pyspark, pandas and what they import, six among them)
    async with running(str(tmp_path), 1, {"jobmanager.executor.preload": "pyspark"}) as c:
        url = c.url(0)
        old, new = [await asubmit(url, {**job, "requirements": r}) for r in ([OLD], [NEW])]
        # (its args larger than an environment variable holds: the new interpreter gets them)
        six = await asubmit(url, {**job, "requirements": ["six==1.16.0", OLD],
                                  "args": {"big": "x" * 200_000}})
        bad = await asubmit(url, {
            **job, "requirements": ["jm-no-such-package-for-tests==1.0"],
            "restart-strategy": {"type": "fixed-delay", "attempts": 3, "delay": "1 s"}})
        got = {jid: await aended(url, jid, 240) for jid in (old, new, six, bad)}
        for jid in (old, new, six):
            assert got[jid]["state"] == "FINISHED", (got[jid], (await ahttp(
                "GET", c.url(0) + f"/jobs/{jid}/exceptions"))[1])
        assert got[old]["result"]["tabulate"] == "0.8.10"
        assert got[new]["result"]["tabulate"] == "0.9.0"
        assert not got[old]["result"]["fresh"]  # forked from the zygote, as every job
        assert got[six]["result"]["six"] == "1.16.0" and got[six]["result"]["fresh"], got[six]
        assert got[six]["result"]["python"].startswith(str(tmp_path)), got[six]
        assert got[six]["result"]["args"] == 200_000
        assert got[bad]["state"] == "FAILED" and len(got[bad]["attempts"]) == 1, got[bad]
        s, ex = await ahttp("GET", c.url(0) + f"/jobs/{bad}/exceptions")
        assert ex["root-exception"].startswith("RequirementsError: pip: ERROR:"), ex
        assert "jm-no-such-package-for-tests" in ex["root-exception"]
        s, b = await ahttp("POST", c.url(0) + "/jobs", {**job, "requirements": ["pyspark"]})
        assert s == 400 and "pyspark is the peers' own" in b["errors"][0], b


async def test_jm_run_takes_a_requirements_file(tmp_path):
    """`jm run APP --requirements FILE --wait`: the application imports the file's
    versions; a file pip's options are in is refused by the CLI in one line."""
    from tests.conftest import running
    from tests.integration.test_cli import jm
    app = tmp_path / "app.py"
    app.write_text("import tabulate\nprint('tabulate', tabulate.__version__)\n")
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"# the job's own\n{NEW}\n")
    async with running(str(tmp_path / "c"), 1) as c:
        rc, out, err = await jm("-a", c.url(0), "run", str(app), "--mode", "connect",
                                "--requirements", str(reqs), "--wait", timeout=240)
        assert rc == 0 and "tabulate 0.9.0" in out, (out, err)
        # `jm submit` of an entry job takes the same file (its environment: cached now)
        entry = tmp_path / "reqjob.py"
        entry.write_text("def main(ctx):\n    import tabulate\n    return tabulate.__version__\n")
        rc, out, err = await jm("-a", c.url(0), "submit", str(entry), "--requirements",
                                str(reqs), "--wait", "--json", timeout=240)
        assert rc == 0 and json.loads(out)["result"] == "0.9.0", (out, err)
        reqs.write_text(f"{NEW}\n--index-url https://example.org/simple\n")
        rc, out, err = await jm("-a", c.url(0), "run", str(app), "--requirements", str(reqs))
        assert rc == 2 and err.strip().splitlines() == [
            f"jm: --requirements {reqs} line 2: --index-url is not taken here (the index is "
            "the peers' jobmanager.envs.* setting; name each requirement)"], err


async def test_wheels_only_unless_source_builds_are_allowed(tmp_path):
    """A source distribution runs its setup code as the peer's user when pip builds it:
    by default a requirement with no wheel fails, pip saying so; allowed, it builds."""
    from jm.cluster.jobs.envs import PipOptions
    sdist_only = requirement_set(["docopt==0.6.2"])  # (published as a source archive only)
    with pytest.raises(EnvBuildError, match="docopt"):
        await EnvCache(str(tmp_path / "a"), 1 << 40).acquire(sdist_only)
    env = await EnvCache(str(tmp_path / "b"), 1 << 40,
                         PipOptions(source_builds=True)).acquire(sdist_only)
    assert _run(env, "import docopt; print(docopt.__version__)") == "0.6.2"
