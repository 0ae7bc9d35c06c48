"""jm.policy.jobs.jobenv: what of the peer's environment its children see."""
from jm.policy.jobs.jobenv import child_environ

PEER = {"PATH": "/usr/bin", "HOME": "/root", "LC_ALL": "C.UTF-8", "SPARK_HOME": "/s",
        "PYTHONPATH": "/p", "JM_CONF_REST_AUTH_TOKEN": "t", "JM_CONF_CLUSTER_SECRET": "c",
        "JM_PROPERTIES": "s3.secret-key: k", "AWS_ACCESS_KEY_ID": "a",
        "AWS_SECRET_ACCESS_KEY": "s", "AZURE_CLIENT_SECRET": "z", "MY_FLAG": "1",
        "MY_OTHER": "2", "TEAM_DSN": "d"}


def test_defaults_pass_what_python_java_and_spark_need_and_nothing_else():
    assert child_environ(PEER) == {"PATH": "/usr/bin", "HOME": "/root", "LC_ALL": "C.UTF-8",
                                   "SPARK_HOME": "/s", "PYTHONPATH": "/p"}


def test_configured_names_and_globs_pass_but_never_the_peers_configuration():
    env = child_environ(PEER, ("MY_*", "TEAM_DSN", "AWS_*", "JM_*", "*"))
    assert {"MY_FLAG", "MY_OTHER", "TEAM_DSN", "AWS_ACCESS_KEY_ID"} <= set(env)
    assert not {"JM_CONF_REST_AUTH_TOKEN", "JM_CONF_CLUSTER_SECRET", "JM_PROPERTIES"} & set(env)
