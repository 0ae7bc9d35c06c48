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


APP = '''import os, sys
from pyspark import SparkFiles
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()

def seen(_):
    from pyspark import SparkFiles as F
    import os
    data = open(F.get("data.txt")).read().strip()
    dep = sorted(os.listdir(F.get("dep")))
    return f"{data}|{','.join(dep)}"
if sys.argv[1] == "classic":
    out = spark.sparkContext.parallelize([0], 1).map(seen).collect()[0]
else:
    from pyspark.sql.functions import udf
    out = spark.range(1).select(udf(seen, "string")("id")).collect()[0][0]
print("SEEN", out)
'''


@pytest.mark.parametrize("mode", ["classic", "connect"])
async def test_jm_run_ships_files_and_archives_as_spark_submit_does(tmp_path, mode):
    """`jm run --files F --archives A.zip#dep`: local files uploaded, then the
    application's Python code on Spark reads them where spark-submit puts them
    (SparkFiles; an archive unpacked as its alias); in connect mode as the session's
    artifacts."""
    import zipfile
    from tests.integration.test_cli import jm
    app = tmp_path / "app.py"
    app.write_text(APP)
    (tmp_path / "data.txt").write_text("hello\n")
    with zipfile.ZipFile(tmp_path / "dep.zip", "w") as z:
        z.writestr("inner.txt", "x")
    async with running(str(tmp_path / "c"), 1, spark=True) as c:
        rc, out, err = await jm("-a", c.url(0), "run", str(app), mode, "--mode", mode,
                                "--files", str(tmp_path / "data.txt"),
                                "--archives", f"{tmp_path / 'dep.zip'}#dep", "--wait",
                                timeout=300)
        assert rc == 0 and "SEEN hello|inner.txt" in out, (out, err)
