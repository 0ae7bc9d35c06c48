"""Real-process fault injection for the JobManager cluster (see chaos/__main__.py)."""
