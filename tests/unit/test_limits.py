"""Pure decisions about job processes' limits, user and cgroup (jm/runtime/limits.py),
the zygote's lease reading (latest_lease), and the cgroup files on a stand-in mount."""
import os
import resource

import pytest

from jm.config import Config, ConfigError
from jm.runtime import limits as L
from jm.runtime.zygoteproto import Lease, Spawn, latest_lease, pack

INF = resource.RLIM_INFINITY


def test_defaults_from_config_do_not_break_spark_clients():
    lim = L.from_conf(Config({}, "/tmp"))
    assert lim.user is None
    assert lim.nproc == 4096
    assert lim.address_space == 0  # a JVM reserves far more address space than it uses
    assert lim.memory == 0 and lim.file_size == 0
    assert lim.open_files == 65536
    assert lim.oom_score_adj == 500


def test_config_keys_parse_sizes_and_name_the_key_on_errors():
    lim = L.from_conf(Config({"jobmanager.executor.limits.memory": "2 gb",
                              "jobmanager.executor.limits.file-size": "10 mb",
                              "jobmanager.executor.user": "nobody"}, "/tmp"))
    assert (lim.memory, lim.file_size, lim.user) == (2 * 2 ** 30, 10 * 2 ** 20, "nobody")
    with pytest.raises(ConfigError, match="jobmanager.executor.limits.nproc"):
        Config({"jobmanager.executor.limits.nproc": -1}, "/tmp")
    with pytest.raises(ConfigError, match="oom-score-adj"):
        L.from_conf(Config({"jobmanager.executor.limits.oom-score-adj": 1001}, "/tmp"))


def test_rlimits_lower_soft_and_hard_and_never_ask_an_unprivileged_peer_for_more():
    lim = L.JobLimits(open_files=65536, file_size=100, address_space=0)
    current = {resource.RLIMIT_NOFILE: (1024, 20000), resource.RLIMIT_FSIZE: (INF, INF),
               resource.RLIMIT_AS: (INF, INF)}
    calls = L.rlimits(lim, current, privileged=False)
    assert (resource.RLIMIT_NOFILE, 20000, 20000) in calls
    assert (resource.RLIMIT_FSIZE, 100, 100) in calls
    assert all(res != resource.RLIMIT_AS for res, _, _ in calls)  # 0: left alone
    assert (resource.RLIMIT_NOFILE, 65536, 65536) in L.rlimits(lim, current, privileged=True)
    # nothing to do when already so
    done = {resource.RLIMIT_NOFILE: (20000, 20000), resource.RLIMIT_FSIZE: (100, 100)}
    assert L.rlimits(lim, done, privileged=False) == []


def test_nproc_counts_the_whole_user_and_is_left_to_the_cgroup_or_root():
    lim = L.JobLimits(nproc=100)
    assert L.nproc_limit(lim, 65534, user_tasks=40, cgroup=False) == 140
    assert L.nproc_limit(lim, 0, user_tasks=40, cgroup=False) is None  # root ignores it
    assert L.nproc_limit(lim, 65534, user_tasks=40, cgroup=True) is None  # pids.max does it
    assert L.nproc_limit(L.JobLimits(nproc=0), 65534, 40, False) is None
    calls = L.rlimits(lim, {}, privileged=True, nproc=140)
    assert (resource.RLIMIT_NPROC, 140, 140) in calls


def test_oom_score_adj_only_goes_down_with_privileges():
    lim = L.JobLimits(oom_score_adj=500)
    assert L.oom_score_adj(lim, 0, privileged=False) == 500
    assert L.oom_score_adj(lim, 500, privileged=False) is None
    assert L.oom_score_adj(L.JobLimits(oom_score_adj=100), 300, privileged=False) is None
    assert L.oom_score_adj(L.JobLimits(oom_score_adj=100), 300, privileged=True) == 100
    assert L.oom_score_adj(L.JobLimits(oom_score_adj=0), 300, privileged=True) is None


def test_user_checks_name_the_key():
    assert L.check_user(None, 1000, None) is None
    assert "no user 'ghost'" in L.check_user("ghost", 0, None)
    assert "jobmanager.executor.user" in L.check_user("ghost", 0, None)
    assert "needs a peer running as root" in L.check_user("nobody", 1000, 65534)
    assert L.check_user("me", 1000, 1000) is None  # the peer's own user: nothing to do
    assert L.check_user("nobody", 0, 65534) is None
    assert L.switch_user(L.JobLimits(user="nobody"), 0, 65534)
    assert not L.switch_user(L.JobLimits(user="root"), 0, 0)
    assert not L.switch_user(L.JobLimits(), 0, None)


def test_cgroup_files_and_when_cgroups_cannot_be_used():
    assert L.cgroup_files(L.JobLimits(memory=2 ** 30, nproc=64)) == {
        "memory.max": str(2 ** 30), "memory.swap.max": "0", "pids.max": "64"}
    assert L.cgroup_files(L.JobLimits()) == {}
    assert L.controllers_needed(L.JobLimits(nproc=5)) == ["pids"]
    need = ["memory", "pids"]
    assert "not a cgroup v2" in L.cgroup_unusable("tmpfs", True, set(), need)
    assert "not writable" in L.cgroup_unusable("cgroup2fs", False, {"memory", "pids"}, need)
    assert "memory" in L.cgroup_unusable("cgroup2fs", True, {"pids"}, need)
    assert L.cgroup_unusable("cgroup2fs", True, {"cpu", "memory", "pids"}, need) is None
    assert L.cgroup_unusable("cgroup2fs", True, set(), []) == "no limit needs a cgroup"


def test_proc_state_and_whether_a_job_may_run():
    assert L.proc_state("123 (python) S 1 123 123 0 -1") == "S"
    assert L.proc_state("7 (a) b) (c) T 1 7 7") == "T"  # a name with ") " in it
    assert L.proc_state("") == ""
    assert L.job_may_run(["S", "R"])
    assert L.job_may_run(["S", ""])  # gone: the parent-death signal handles that
    assert not L.job_may_run(["T", "S"])
    assert not L.job_may_run(["S", "t"])


def test_latest_lease_is_the_last_whole_lease_frame():
    buf = pack(Lease(10.0)) + pack(Spawn("k", {"a": 1})) + pack(Lease(5.0))
    assert latest_lease(buf) == 5.0  # the peer may shorten it (fence now): last one wins
    assert latest_lease(pack(Spawn("k", {}))) is None
    partial = pack(Lease(10.0)) + pack(Lease(20.0))[:-2]
    assert latest_lease(partial) == 10.0
    assert latest_lease(b"") is None


def test_cgroup_setup_join_and_removal_on_a_stand_in_mount(tmp_path):
    from jm.runtime import confine
    mount = tmp_path / "cg"
    mount.mkdir()
    (mount / "cgroup.controllers").write_text("cpu memory pids\n")
    (mount / "cgroup.subtree_control").write_text("")
    lim = L.JobLimits(memory=2 ** 30, nproc=64)
    base, note = confine.setup_cgroups(lim, 4242, str(mount), fs_type="cgroup2fs")
    assert base == str(mount / "jobmanager-zygote-4242"), note
    assert (mount / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert open(os.path.join(base, "cgroup.subtree_control")).read() == "+memory +pids"
    path = confine.join_cgroup(base, lim)
    assert path == os.path.join(base, f"job-{os.getpid()}")
    assert open(os.path.join(path, "memory.max")).read() == str(2 ** 30)
    assert open(os.path.join(path, "pids.max")).read() == "64"
    assert open(os.path.join(path, "cgroup.procs")).read() == str(os.getpid())
    assert confine.remove_cgroup(path) and not os.path.exists(path)
    assert confine.remove_cgroup(base) and not os.path.exists(base)
    none, note = confine.setup_cgroups(lim, 4242, str(mount), fs_type="tmpfs")
    assert none is None and "not a cgroup v2 mount" in note


def test_a_limit_above_a_hard_limit_root_may_not_raise_is_clamped_to_it():
    # a root peer asks for 65536 (privileged); in a container its hard limit of 20000
    # cannot be raised: the refused call is made again at the hard limit
    call = (resource.RLIMIT_NOFILE, 65536, 65536)
    assert L.clamped(call, (1024, 20000)) == (resource.RLIMIT_NOFILE, 20000, 20000)
    assert L.clamped(call, (20000, 20000)) == (resource.RLIMIT_NOFILE, 20000, 20000)
    # not above the hard limit (or none): the refusal is a real error, nothing to clamp
    assert L.clamped((resource.RLIMIT_NOFILE, 1000, 1000), (1024, 20000)) is None
    assert L.clamped(call, (1024, INF)) is None


def test_the_one_warning_names_the_key_the_limit_and_what_jobs_get():
    current = {resource.RLIMIT_NOFILE: (1024, 20000), resource.RLIMIT_FSIZE: (INF, INF),
               resource.RLIMIT_AS: (INF, 10 ** 9)}
    lim = L.JobLimits(open_files=65536, file_size=100, address_space=2 * 10 ** 9, nproc=50)
    over = L.above_hard(lim, current)
    assert over == [L.OverHard(resource.RLIMIT_AS, 2 * 10 ** 9, 10 ** 9),
                    L.OverHard(resource.RLIMIT_NOFILE, 65536, 20000)]
    text = L.clamp_warning(over)
    assert "\n" not in text
    assert "jobmanager.executor.limits.open-files is 65536, above the hard limit 20000" in text
    assert "jobs get 20000" in text and "jobmanager.executor.limits.address-space" in text
    assert "file-size" not in text and "nproc" not in text  # within its limit; a job's own
    assert L.above_hard(L.JobLimits(open_files=20000), current) == []
    assert L.above_hard(L.JobLimits(), current) == []
    assert L.clamp_warning([]) == ""
