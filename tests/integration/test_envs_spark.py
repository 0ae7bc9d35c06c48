"""Jobs' own requirements on real Spark: two connect-mode jobs with two versions of one
package at once on one engine, each UDF importing its job's; a classic-mode job's UDF
(its own driver's Python workers) the same."""
import asyncio
import os

import pytest
import pytest_asyncio

from tests.conftest import running
from tests.helpers import aended, ahttp, asubmit, multipart

# Spark JVMs: the peer's Connect server (one for the module), classic drivers
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
JOB = {"entry": "envs_jobs:udf_versions", "pyfiles": [FIX]}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def spark1(tmp_path_factory):
    """One peer with its Spark Connect server, for every test here."""
    async with running(str(tmp_path_factory.mktemp("envs-spark")), 1, spark=True) as c:
        yield c


async def test_udfs_import_their_own_job_s_versions_on_one_engine(spark1):
    c = spark1
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
        assert (job["result"]["driver"], job["result"]["udf"]) == (version, version), \
            (want, job)
        assert "/envs/" in job["result"]["udf-file"], job  # the peer's cached one
    # a Livy session brings its own too, through the Livy client: its pyFiles (its
    # code imports them), its files (its UDFs read them), its requirements (the
    # environment the jobs' 0.9.0 built, from the peer's cache)
    mod = await _upload(url, "sessmod.py", "WHO = 'sessmod'\n")
    data = await _upload(url, "sessdata.txt", "from-a-file\n")
    out = await asyncio.to_thread(_livy_run, url, mod, data, SESSION_CODE)
    assert out.strip() == "sessmod 0.9.0 0.9.0|from-a-file", out


SESSION_CODE = """import sessmod, tabulate
from pyspark.sql.functions import udf

def seen(_):
    import tabulate
    from pyspark import SparkFiles
    return tabulate.__version__ + "|" + open(SparkFiles.get("sessdata.txt")).read().strip()
print(sessmod.WHO, tabulate.__version__, spark.range(1).select(udf(seen, "string")("id"))
      .collect()[0][0])
"""


async def _upload(url, name, text):
    s, b = await ahttp("POST", url + "/artifacts", raw=multipart(name, text.encode())[0],
                       headers={"Content-Type": multipart(name, b"")[1]})
    assert s == 201, b
    return b["pyfile"]


def _livy_run(url, mod, data, code):
    from livy import LivySession, SessionKind
    with LivySession.create(url, kind=SessionKind.PYSPARK, py_files=[mod], files=[data],
                            spark_conf={"spark.jm.requirements": "tabulate==0.9.0"},
                            echo=False, check=False) as py:
        out = py.run(code)
        assert out.status.value == "ok", (out.ename, out.evalue, out.traceback)
        return out.text


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
async def test_jm_run_ships_files_and_archives_as_spark_submit_does(spark1, tmp_path, mode):
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
    c = spark1
    rc, out, err = await jm("-a", c.url(0), "run", str(app), mode, "--mode", mode,
                            "--files", str(tmp_path / "data.txt"),
                            "--archives", f"{tmp_path / 'dep.zip'}#dep", "--wait",
                            timeout=300)
    assert rc == 0 and "SEEN hello|inner.txt" in out, (out, err)
