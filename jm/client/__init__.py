"""The cluster's client: the `jm` CLI (cli.py), the Python jobs API (`Jobs`, jobs.py),
DB-API (dbapi.py) and the `jm://` SQLAlchemy dialect (sqla/). Standard library only."""


def __getattr__(name: str):
    if name in ("Jobs", "JobFailed"):  # (imported when asked for: the CLI does not need it)
        from jm.client import jobs
        return getattr(jobs, name)
    raise AttributeError(f"module 'jm.client' has no attribute {name!r}")
