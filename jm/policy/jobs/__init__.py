"""Pure decisions about jobs: specs and their options, attempts and restarts, what a job process is told (RunParams) and hands back, retention and cleanup of what jobs leave."""
