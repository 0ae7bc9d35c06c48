"""bench/vs_flink.py in parts: procs (set-up, processes, HTTP), flink, ours, report."""
