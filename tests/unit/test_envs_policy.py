"""A job's requirements (jm/policy/jobs/envs.py): valid sets, one spelling and key per set,
what stays the peers', requirements files, and which cached environments make room."""
import pytest

from jm.policy.jobs.envs import MAX_REQUIREMENTS, CachedEnv, requirement_set, to_evict
from jm.policy.jobs.reqfile import RequirementsError, livy_requirements, requirements_file


def test_the_same_set_in_other_words_is_one_set_with_one_key():
    a = requirement_set(["Requests[SOCKS]>=2.0,<3", "six==1.16.0", "six==1.16.0"])
    b = requirement_set(["six == 1.16.0", "requests[socks]<3,>=2.0"])
    assert a == b and a.requirements == ("requests[socks]<3,>=2.0", "six==1.16.0")
    assert a.key("3.11") == b.key("3.11") != a.key("3.12")
    assert a.key("3.11") != requirement_set(["six==1.15.0"]).key("3.11")
    assert a.text() == "requests[socks]<3,>=2.0\nsix==1.16.0\n"
    marked = requirement_set(["tomli>=1; python_version < '3.11'"])
    assert marked.requirements == ('tomli>=1; python_version < "3.11"',)


@pytest.mark.parametrize("raw, why", [
    ("six", "must be a list"),
    ([""], "requirements[0]: a requirement is a non-empty string"),
    ([7], "requirements[0]: a requirement is a non-empty string"),
    (["six", "not a requirement!"], "requirements[1]: 'not a requirement!' is not a pip"),
    (["PySpark==3.5.0"], "PySpark is the peers' own"),
    (["py4j"], "py4j is the peers' own"),
    (["x @ file:///etc/passwd"], "only https:// URLs"),
    (["x @ http://mirror/x.whl"], "only https:// URLs"),
    (["x" * 1001], "longer than 1000 characters"),
    (["a"] * (MAX_REQUIREMENTS + 1), f"at most {MAX_REQUIREMENTS} requirements"),
])
def test_a_bad_set_names_each_bad_entry(raw, why):
    with pytest.raises(RequirementsError) as exc:
        requirement_set(raw)
    assert any(why in e for e in exc.value.errors), exc.value.errors


def test_a_requirements_file_as_pip_reads_it_but_without_options():
    text = "# pinned\nsix==1.16.0  # a comment\n\nrequests>=2,\\\n<3\n"
    assert requirements_file(text) == ["six==1.16.0", "requests>=2,<3"]
    with pytest.raises(RequirementsError, match="line 2: --index-url is not taken here"):
        requirements_file("six\n--index-url https://x/simple\n")
    with pytest.raises(RequirementsError, match="larger than 64 KB"):
        requirements_file("a\n" * 40_000)
    assert livy_requirements("six==1.16.0\nattrs") == ["six==1.16.0", "attrs"]
    assert livy_requirements(["six"]) == ["six"]


def test_the_least_recently_used_environments_not_in_use_make_room():
    envs = [CachedEnv("old-busy", 40, 1.0, 1), CachedEnv("old", 30, 2.0, 0),
            CachedEnv("mid", 30, 3.0, 0), CachedEnv("new", 30, 4.0, 0)]
    assert to_evict(envs, 130) == []
    assert to_evict(envs, 100) == ["old"]
    assert to_evict(envs, 70) == ["old", "mid"]
    assert to_evict(envs, 10) == ["old", "mid", "new"]  # the one in use stays, over the bound


def test_pip_s_error_is_its_error_lines_and_the_conflict_behind_them():
    from jm.cluster.jobs.envs import pip_error
    out = ("Collecting delta-spark==3.2.0\n  Downloading delta_spark-3.2.0.whl\n"
           "INFO: pip is looking at multiple versions\n"
           "ERROR: Cannot install delta-spark==3.2.0 because these package versions have "
           "conflicting dependencies.\n\nThe conflict is caused by:\n"
           "    delta-spark 3.2.0 depends on pyspark<3.6.0 and >=3.5.0\n"
           "    The user requested (constraint) pyspark==4.3.0\n\n"
           "To fix this you could try to:\n1. loosen the range\n"
           "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/\n")
    assert pip_error(out) == (
        "pip: ERROR: Cannot install delta-spark==3.2.0 because these package versions have "
        "conflicting dependencies. | delta-spark 3.2.0 depends on pyspark<3.6.0 and >=3.5.0 "
        "| The user requested (constraint) pyspark==4.3.0")
    assert pip_error("x\nERROR: No matching distribution found for nope==1\n") == \
        "pip: ERROR: No matching distribution found for nope==1"
    assert pip_error("a\nb\n", "venv") == "venv: a | b" and pip_error("") == "pip: pip failed"
