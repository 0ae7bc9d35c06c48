"""A job's own Python environment on this peer (its spec's `requirements`): taken from the
peer's cache, or built there once (jm/cluster/jobs/envs.py), for every attempt of the job's
JobMaster, and given back when the JobMaster ends."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from jm.cluster.jobs.envs import Env, EnvBuildError
from jm.policy.jobs.envs import RequirementSet
from jm.policy.jobs.runparams import RunParams
from jm.policy.jobs.submitopts import with_packed_env

NOT_RETRIED = "its requirements could not be installed"  # a final failure's reason


class JobPython:
    def __init__(self, envs: Any, requirements: list) -> None:
        self.envs = envs  # EnvCache (None: this peer builds no environments)
        self.reqs = RequirementSet(tuple(requirements))
        self.env: Optional[Env] = None

    async def acquire(self) -> Env:
        """The environment (EnvBuildError, pip's error, when it cannot be built)."""
        if self.env is None:
            if self.envs is None:
                raise EnvBuildError("this peer builds no Python environments")
            self.env = await self.envs.acquire(self.reqs)
        return self.env

    async def run_in(self, params: RunParams, connect: bool, own_engine: bool) -> RunParams:
        """An attempt's parameters with the acquired environment: the job process puts it
        first on its path, its UDFs run its interpreter where Spark runs on this host (an
        engine of this peer, a local master); else it goes to them packed, as Spark's
        documentation ships a venv: a classic-mode job's executors on a cluster get it
        in spark.archives, a connect-mode job's session on an endpoint of spark.remote as
        an archive artifact, and they run `./jm-python/bin/python` from there."""
        env = self.env
        assert env is not None
        params = replace(params, python_env=env.site, python_exec=env.python)
        here = own_engine if connect else \
            (params.spark_master or "local").startswith("local")
        if here:
            return params
        conf, workers = with_packed_env(dict(params.spark_conf), await self.envs.packed(env))
        return replace(params, spark_conf=conf, executor_python=workers)

    def release(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            self.envs.release(env)

    @staticmethod
    def failure(exc: EnvBuildError) -> dict:
        """The attempt's final failure: no restart installs what pip could not."""
        return {"exception": f"RequirementsError: {exc}", "traceback": "", "final": True,
                "reason": NOT_RETRIED}
