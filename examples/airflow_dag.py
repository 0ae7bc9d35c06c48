"""An Airflow DAG that runs a pipeline on the cluster and waits for it without holding a
worker slot: a deferrable operator on jm.client.Jobs (install the light client,
`pip install jm-client`, where Airflow's workers and triggerer run).

    JM_ADDRESS=http://peer1:8081,http://peer2:8081  JM_TOKEN=<a submit token>

The task submits with a request id made of the DAG, task and run ids: a retry of the task
(a worker lost after it submitted) finds the job it started instead of starting a second
one. It then defers to JmJobTrigger, which waits in Airflow's triggerer on an asyncio
loop (Jobs.wait_async) and wakes the task when the job ends; the task returns the job's
result (an XCom) or fails with the job's error.
"""
from __future__ import annotations

import datetime
from typing import Any, AsyncIterator

from airflow import DAG
from airflow.exceptions import AirflowException
from airflow.models.baseoperator import BaseOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

from jm.client import JobFailed, Jobs


class JmJobTrigger(BaseTrigger):
    """Fires once job `job_id` has ended (in the triggerer: no worker waits)."""

    def __init__(self, job_id: str, address: str | None = None, poll: float = 5.0) -> None:
        super().__init__()
        self.job_id, self.address, self.poll = job_id, address, poll

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.JmJobTrigger",
                {"job_id": self.job_id, "address": self.address, "poll": self.poll})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        jobs = Jobs(self.address)  # (the token from JM_TOKEN)
        try:
            job = await jobs.wait_async(self.job_id, poll=self.poll)
            yield TriggerEvent({"state": job["state"], "job_id": self.job_id})
        except JobFailed as exc:
            yield TriggerEvent({"state": exc.job.get("state"), "job_id": self.job_id,
                                "error": exc.failure})


class JmSubmitOperator(BaseOperator):
    """Run a job spec (docs/guide/jobs.md) on the cluster; its result is the task's XCom."""
    template_fields = ("spec",)

    def __init__(self, *, spec: dict, address: str | None = None, poll: float = 5.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.address, self.poll = spec, address, poll

    def execute(self, context: Any) -> None:
        jobs = Jobs(self.address)
        request_id = f"{self.dag_id}.{self.task_id}.{context['run_id']}"
        job_id = jobs.submit(self.spec, request_id=request_id)
        self.log.info("job %s submitted (request id %s)", job_id, request_id)
        self.defer(trigger=JmJobTrigger(job_id, self.address, self.poll),
                   method_name="finished")

    def finished(self, context: Any, event: dict) -> Any:
        if event["state"] != "FINISHED":
            raise AirflowException(f"job {event['job_id']} ended {event['state']}: "
                                   f"{event.get('error') or 'see jm exceptions'}")
        return Jobs(self.address).result(event["job_id"])


with DAG("jm_daily_etl", start_date=datetime.datetime(2026, 1, 1), schedule="@daily",
         catchup=False) as dag:
    JmSubmitOperator(task_id="etl", spec={
        "entry": "etl:main", "pyfiles": ["s3://my-bucket/pipelines/etl.py"],
        "args": {"day": "{{ ds }}"}, "restart-strategy": {"type": "fixed-delay",
                                                          "attempts": 2, "delay": "30 s"}})
