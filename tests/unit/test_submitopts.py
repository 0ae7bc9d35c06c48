"""spark-submit's options as Spark properties and their checks (jm/policy/jobs/submitopts.py),
and `jm run`'s mapping of them (local files uploaded, an archive's alias kept)."""
import argparse

import pytest

from jm.client.cli_run import _submit_options
from jm.policy.jobs.spec import SpecError, validate_spec
from jm.policy.jobs.submitopts import artifact_refs, submit_errors, with_local_files

ART = "artifact:sha256:" + "a" * 64


def test_each_option_sets_the_property_spark_submit_sets(tmp_path):
    jar = tmp_path / "dep.jar"
    jar.write_bytes(b"PK")
    uploads = []

    def upload(client, path, code=True):
        uploads.append((path, code))
        return {"pyfile": ART}
    a = argparse.Namespace(jars=f"{jar},https://repo/x.jar", files=None,
                           archives=f"{jar}#env", packages="org.a:b:1.0",
                           repositories=None, exclude_packages=None, driver_memory="2g",
                           driver_cores=None, executor_memory="4g", executor_cores="2",
                           num_executors="3", total_executor_cores=None)
    assert _submit_options(None, a, upload) == {
        "spark.jars": f"{ART},https://repo/x.jar", "spark.archives": f"{ART}#env",
        "spark.jars.packages": "org.a:b:1.0", "spark.driver.memory": "2g",
        "spark.executor.memory": "4g", "spark.executor.cores": "2",
        "spark.executor.instances": "3"}
    assert uploads == [(str(jar), False), (str(jar), False)]  # (not code: any file)


@pytest.mark.parametrize("conf, mode, why", [
    ({"spark.jars.packages": "org.a:b"}, "classic", "is not a Maven coordinate"),
    ({"spark.jars.packages": "org.a:b:1.0"}, "connect", "give spark-mode classic"),
    ({"spark.jars.excludes": "org.a"}, "classic", "is not group:artifact"),
    ({"spark.jars.repositories": "ftp://x"}, "classic", "is not an http(s) URL"),
    ({"spark.files": "relative.txt"}, "classic", "is not an artifact"),
    ({"spark.files": "s3://b/x.txt"}, "classic", "is not an artifact"),
    ({"spark.files": f"{ART}#alias"}, "classic", "only an archive takes '#name'"),
    ({"spark.archives": f"{ART}#../up"}, "classic", "only an archive takes '#name'"),
    ({"spark.jars": "https://repo/x.jar"}, "connect", "takes local files only"),
])
def test_a_bad_dependency_is_a_clear_error(conf, mode, why):
    assert any(why in e for e in submit_errors(conf, mode)), submit_errors(conf, mode)


def test_good_dependencies_pass_and_artifacts_become_local_paths():
    conf = {"spark.jars": f"{ART},/opt/x.jar", "spark.archives": f"{ART}#env",
            "spark.jars.packages": "org.apache.spark:spark-avro_2.13:4.0.0",
            "spark.jars.excludes": "org.slf4j:slf4j-api"}
    assert submit_errors(conf, "classic") == []
    assert artifact_refs(conf) == [ART, ART]
    local = with_local_files(conf, {ART: "/blobs/a/dep.jar"})
    assert local["spark.jars"] == "/blobs/a/dep.jar,/opt/x.jar"
    assert local["spark.archives"] == "/blobs/a/dep.jar#env"
    with pytest.raises(SpecError, match="give spark-mode classic"):
        validate_spec({"entry": "m:f", "spark-conf": {"spark.jars.packages": "a:b:1"}})
    spec = validate_spec({"script": "/a.py", "spark-conf": {"spark.jars.packages": "a:b:1"}})
    assert spec["spark-mode"] == "classic"


def test_a_packed_environment_joins_the_archives_and_is_the_workers_python():
    from jm.policy.jobs.submitopts import with_packed_env
    conf, python = with_packed_env({"spark.archives": "/a/dep.zip#dep", "x": "1"},
                                   "/envs/k/jm-packed.tar.gz")
    assert conf == {"spark.archives": "/a/dep.zip#dep,/envs/k/jm-packed.tar.gz#jm-python",
                    "x": "1"}
    assert python == "./jm-python/bin/python"
    assert with_packed_env({}, "/p.tgz")[0] == {"spark.archives": "/p.tgz#jm-python"}


def test_an_environment_packs_whole_with_its_links_and_without_itself(tmp_path):
    import os
    import tarfile
    from jm.cluster.jobs.envs import PACKED, _pack
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "lib" / "site").mkdir(parents=True)
    (env / "lib" / "site" / "m.py").write_text("X = 1\n")
    os.symlink("/usr/bin/python3", env / "bin" / "python")
    (env / PACKED).write_text("an older one")
    size = _pack(str(env), str(tmp_path / "out.tar.gz"))
    assert size == (tmp_path / "out.tar.gz").stat().st_size
    with tarfile.open(tmp_path / "out.tar.gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert "lib/site/m.py" in members and PACKED not in members
    assert members["bin/python"].issym() and members["bin/python"].linkname == "/usr/bin/python3"
    assert not list(tmp_path.glob("*.tmp"))
