"""jm/policy/sql/sessiondeps.py: what a SQL gateway or Livy session brings with it (artifacts,
requirements) from its properties, and Livy's session fields as those properties."""
import pytest

from jm.policy.sql.sessiondeps import SessionDeps, livy_fields, session_deps, spark_settings
from jm.wire import livysessions as W

ART = "artifact:sha256:" + "ab" * 32


def test_a_session_s_files_and_requirements_come_from_its_properties():
    props = {"spark.jars": f"/opt/jars/a.jar,{ART}", "spark.archives": "/e/env.tgz#env",
             "spark.submit.pyFiles": "/lib/m.py", "spark.files": " /etc/x.csv ",
             "spark.jm.requirements": "six==1.16.0\n# a comment\nTabulate>=0.9",
             "spark.sql.shuffle.partitions": "4"}
    deps = session_deps(props)
    assert deps.files == (("", "/opt/jars/a.jar"), ("", ART), ("file", "/etc/x.csv"),
                          ("archive", "/e/env.tgz#env"), ("pyfile", "/lib/m.py"))
    assert deps.requirements == ("six==1.16.0", "tabulate>=0.9") and deps
    assert deps.refs() == [ART]
    assert spark_settings(props) == {"spark.sql.shuffle.partitions": "4"}
    assert not session_deps({"spark.sql.shuffle.partitions": "4"})
    assert session_deps({}) == SessionDeps()


def test_bad_dependencies_are_refused_each_named():
    with pytest.raises(ValueError) as e:
        session_deps({"spark.jars": "lib/a.jar,https://x/b.jar",
                      "spark.submit.pyFiles": "/m.zip#m", "spark.jars.packages": "a:b:1",
                      "spark.jm.requirements": "pyspark==4.0\nnot a requirement!",
                      "spark.files": ",".join(f"/f{i}" for i in range(101))})
    errors = e.value.args[0]
    assert any("'lib/a.jar' is not an artifact" in x for x in errors), errors
    assert any("https://x/b.jar" in x and "local files only" in x for x in errors)
    assert any("spark.submit.pyFiles" in x and "#name" in x for x in errors)
    assert any("spark.jars.packages" in x for x in errors)
    assert any("pyspark" in x for x in errors) and any("[1]" in x for x in errors)
    assert any("spark.files: at most 100" in x for x in errors)
    assert all(x.startswith(("property ", "spark.")) for x in errors), errors


def test_livy_s_session_fields_are_spark_properties_as_livy_maps_them():
    props, errors = livy_fields({"jars": ["/a.jar"], "pyFiles": [ART],
                                 "conf": {"spark.jars": "/b.jar"}})
    assert props == {"spark.jars": "/b.jar,/a.jar", "spark.submit.pyFiles": ART}
    assert not errors
    _, errors = livy_fields({"files": "/a.csv", "archives": [1]})
    assert errors == ["files must be a list of strings (artifacts or absolute paths)",
                      "archives must be a list of strings (artifacts or absolute paths)"]
    r = W.session_request({"kind": "pyspark", "pyFiles": [ART], "files": ["/d/x.csv"],
                           "driverMemory": "2g",
                           "conf": {"spark.jm.requirements": "six==1.16.0"}})
    assert r.conf == {"spark.jm.requirements": "six==1.16.0", "spark.submit.pyFiles": ART,
                      "spark.files": "/d/x.csv"}
    assert r.notes == ("driverMemory: not applied (interactive sessions share their engine; "
                       "size it with the peers' spark.* settings)",)
    with pytest.raises(ValueError):
        W.session_request({"jars": "/a.jar"})
