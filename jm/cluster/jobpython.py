"""A job's own Python environment on this peer (its spec's `requirements`): taken from the
peer's cache, or built there once (jm/cluster/envs.py), for every attempt of the job's
JobMaster, and given back when the JobMaster ends."""
from __future__ import annotations

from typing import Any, Optional

from jm.cluster.envs import Env, EnvBuildError
from jm.policy.envs import RequirementSet

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

    def release(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            self.envs.release(env)

    @staticmethod
    def failure(exc: EnvBuildError) -> dict:
        """The attempt's final failure: no restart installs what pip could not."""
        return {"exception": f"RequirementsError: {exc}", "traceback": "", "final": True,
                "reason": NOT_RETRIED}
