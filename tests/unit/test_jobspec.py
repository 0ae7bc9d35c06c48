"""raft/jobspec.py and jm/policy/api/submission.py: a submission parsed into a frozen
JobSpec owned by its tenant (or refused with the right status), whose wire form is what
was accepted, kept in the job's record as a JobSpec and in snapshots as plain data."""
import dataclasses
import pickle

import pytest

from jm.api import ANYONE, Credential
from jm.policy.api.submission import (Refused, Submission, SubmitLimits, prepare_submission,
                                      with_artifact)
from jm.policy.jobs.spec import SpecLimits, validate_spec
from raft.jobspec import JobSpec, wire_problems
from raft.records import JobRecord

VALID = [
    {"entry": "pkg.mod:main", "args": {"n": 1, "nested": {"a": [1, 2]}}},
    {"script": "/apps/a.py", "argv": ["1", "x"], "spark-conf": {"spark.x.y": True},
     "slots": 2, "name": "etl"},
    {"sql": "SELECT 1", "tenant": "t1", "proxy-user": "alice"},
    {"entry": "a:b", "job-type": "streaming", "savepoint-path": "/sp/1",
     "restart-strategy": {"type": "none"}, "requirements": ["numpy==2.0"]},
    {"script": "s3://mybucket/app.zip", "pyfiles": ["/lib/x.py", "gs://other-b/y.zip"],
     "spark-mode": "connect", "spark-conf": {}},
    {"script": "/a.py", "spark-mode": "classic", "jobid": "my-job_1"},
]
TENANT_A = Credential("a-dev", "developer", "a")


def _limits(max_slots=4, proxy=("alice",), granted=None):
    return SubmitLimits(SpecLimits(), max_slots, proxy,
                        lambda tenant: (granted or {}).get(tenant, ()))


@pytest.mark.parametrize("raw", VALID)
def test_the_wire_form_is_what_was_accepted(raw):
    accepted = validate_spec(raw)
    spec = JobSpec.from_wire(accepted)
    assert spec.wire() == accepted
    assert JobSpec.from_wire(spec.wire()) == spec


def test_a_spec_is_read_as_attributes_and_cannot_be_changed():
    spec = JobSpec.from_wire(validate_spec(VALID[3]))
    assert spec.streaming and not spec.classic and spec.requirements == ("numpy==2.0",)
    assert spec.restart_strategy["type"] == "none"
    with pytest.raises(AttributeError):
        spec.slots = 3
    with pytest.raises(TypeError):
        spec.args["n"] = 2  # (its mappings are read-only too)
    classic = JobSpec.from_wire(validate_spec(VALID[1]))
    assert classic.classic and classic.code_refs() == ["/apps/a.py"]
    assert classic.spark_conf == {"spark.x.y": "true"}  # as Spark reads it


def test_a_command_spec_of_the_wrong_types_takes_defaults_instead_of_failing():
    spec = JobSpec.from_wire({"jobid": "j", "slots": "many", "args": [1], "pyfiles": "x",
                              "argv": [1, "a"], "spark-conf": 3, "job-type": None})
    assert (spec.slots, dict(spec.args), spec.pyfiles, spec.argv, spec.spark_conf,
            spec.job_type, spec.name) == (1, {}, (), ("a",), None, "batch", "j")


@pytest.mark.parametrize("raw", VALID)
def test_a_spec_read_from_the_wire_is_the_one_its_constructor_makes(raw):
    """from_wire makes the same spec, field for field, as JobSpec(...) with the values
    read, its mappings read-only, and takes an id given over the wire form's own."""
    accepted = validate_spec(raw)
    spec = JobSpec.from_wire(accepted)
    built = JobSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(JobSpec)})
    assert spec == built and repr(spec) == repr(built)
    assert all(type(getattr(spec, m)) is type(getattr(built, m))
               for m in ("args", "spark_conf", "restart_strategy"))
    again = JobSpec.from_wire(accepted, jobid="other")
    assert again == dataclasses.replace(spec, jobid="other")  # (a valid spec has a name)


def test_from_wire_sets_every_field():
    spec = JobSpec.from_wire({})
    assert spec == JobSpec("", "") and spec.job_type == "batch" and spec.spark_mode == "connect"
    assert JobSpec.from_wire({"script": "/a.py"}).spark_mode == "classic"
    assert JobSpec.from_wire({"jobid": "j", "name": ""}).name == "j"
    assert JobSpec.from_wire({"jobid": "j"}, jobid="k").name == "k"
    assert JobSpec.from_wire({"jobid": "j"}, jobid=7).jobid == ""  # (a command's junk)


def test_a_wire_form_of_the_wrong_types_is_named_field_by_field():
    class Text(str):
        pass
    assert wire_problems(validate_spec(VALID[1])) == []
    assert wire_problems({"name": Text("n"), "slots": 2, "argv": ("a",)}) == []
    assert wire_problems({"slots": True}) == ["slots must be of type int"]
    assert wire_problems({"tenant": 3, "jobid": ["j"], "args": None, "other": 1}) == [
        "jobid must be of type str", "tenant must be of type str"]
    assert wire_problems([]) == ["a job's spec is a JSON object"]


def test_a_record_holds_a_jobspec_and_a_snapshot_its_wire_form():
    wire = validate_spec(VALID[0])
    job = JobRecord("j1", "n", wire, 1.0)  # (a wire form given is read)
    assert isinstance(job.spec, JobSpec) and job.spec.entry == "pkg.mod:main"
    assert job.__getstate__()["spec"] == wire  # plain data, for a replica of any build
    again = pickle.loads(pickle.dumps(job))
    assert again.spec == job.spec and again.slots == 1
    older = JobRecord.__new__(JobRecord)  # a record of an older build's snapshot
    older.__setstate__(dict(job.__dict__, spec=wire))
    assert older.spec == job.spec


def test_a_submission_is_owned_by_its_callers_tenant():
    out = prepare_submission(dict(VALID[0]), TENANT_A, _limits())
    assert isinstance(out, Submission) and out.spec.tenant == "a" and out.remote == ()
    admin = prepare_submission(dict(VALID[0], tenant="b"), ANYONE, _limits())
    assert admin.spec.tenant == "b"
    other = prepare_submission(dict(VALID[0], tenant="b"), TENANT_A, _limits())
    assert isinstance(other, Refused) and other.status == 403
    assert "tenant a makes work of its own tenant only" in other.errors[0]


def test_refusals_carry_their_status_and_every_problem():
    bad = prepare_submission({"entry": "x", "slots": 9, "bogus": 1}, ANYONE, _limits())
    assert isinstance(bad, Refused) and bad.status == 400 and len(bad.errors) == 3
    big = prepare_submission({"sql": "x" * 300_000}, ANYONE, _limits())
    assert isinstance(big, Refused) and big.status == 413 and "sql is" in big.errors[0]
    assert prepare_submission([], ANYONE, _limits()).status == 400


def test_a_proxy_user_needs_the_peers_and_the_tenants_grant():
    raw = dict(VALID[0], **{"proxy-user": "alice"})
    assert isinstance(prepare_submission(raw, ANYONE, _limits()), Submission)
    nobody = prepare_submission(raw, ANYONE, _limits(proxy=()), names={"proxy-user": "proxyUser"})
    assert nobody.status == 403 and nobody.errors[0].startswith("proxyUser: jobs may not")
    refused = prepare_submission(raw, TENANT_A, _limits())
    assert refused.status == 403 and "tenant a's jobs" in refused.errors[0]
    granted = prepare_submission(raw, TENANT_A, _limits(granted={"a": ("alice",)}))
    assert granted.spec.proxy_user == "alice"


def test_remote_code_is_named_and_then_replaced_by_its_artifact():
    out = prepare_submission(dict(VALID[4]), ANYONE, _limits())
    assert out.remote == (("script", "s3://mybucket/app.zip"), ("pyfiles", "gs://other-b/y.zip"))
    spec = out.spec
    for _, uri in out.remote:
        spec = with_artifact(spec, uri, f"artifact:sha256:{'0' * 63}{len(uri) % 10}")
    assert spec.script.startswith("artifact:") and spec.pyfiles[0] == "/lib/x.py"
    assert spec.pyfiles[1].startswith("artifact:") and out.spec.script.startswith("s3://")
