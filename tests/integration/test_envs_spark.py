"""Jobs' own requirements on real Spark: two connect-mode jobs with two versions of one
package at once on one engine, each UDF importing its job's; a classic-mode job's UDF
(its own driver's Python workers) the same."""
import os

import pytest

from tests.conftest import running
from tests.helpers import aended, ahttp, asubmit

pytestmark = pytest.mark.slow  # Spark JVMs: the peer's Connect server, a classic driver

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
JOB = {"entry": "envs_jobs:udf_versions", "pyfiles": [FIX]}


async def test_udfs_import_their_own_job_s_versions_on_one_engine(tmp_path):
    async with running(str(tmp_path), 1, spark=True) as c:
        url = c.url(0)
        jobs = {"0.8.10": await asubmit(url, {**JOB, "requirements": ["tabulate==0.8.10"]}),
                "0.9.0": await asubmit(url, {**JOB, "requirements": ["tabulate==0.9.0"]}),
                "classic": await asubmit(url, {**JOB, "requirements": ["tabulate==0.8.10"],
                                               "spark-mode": "classic"})}
        for want, jid in jobs.items():
            job = await aended(url, jid, 300)
            if job["state"] != "FINISHED":
                _, ex = await ahttp("GET", c.url(0) + f"/jobs/{jid}/exceptions")
                raise AssertionError((job, ex))
            version = "0.8.10" if want == "classic" else want
            assert job["result"] == {"driver": version, "udf": version}, (want, job)
