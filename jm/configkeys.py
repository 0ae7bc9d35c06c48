"""What each configuration key means: one short description per key of `jm.config.KEYS`,
kept here beside the key definitions (jm/config.py holds the keys' defaults,
jm/configvalues.py the parsers), and a note for the defaults whose value alone does not say what they mean.

docs/reference/config.md is generated from these and `KEYS` (`python -m jm.docgen`), and
tests/unit/test_docgen.py fails when a key has no description, a description names no
key, or the generated file is not what the code says. A new key needs a line here.
Descriptions are Markdown; links are relative to docs/reference/.
"""
from __future__ import annotations

# What an unset (or zero) default means, where the value alone does not say it.
DEFAULT_NOTES: dict[str, str] = {
    "rest.bind-address": "the peer's host in `conf/masters`",
    "restart-strategy.type": "`none` for batch and application jobs, `fixed-delay` for "
                             "streaming jobs",
    "jobmanager.weight": "proportional to `jobmanager.slots`",
    "state.savepoints.dir": "`<high-availability.storageDir>/savepoints`",
    "s3.endpoint": "the AWS default",
    "gs.endpoint": "Google's",
    "spark.connect.token": "a random one at each peer start",
    "raft.voters": "3, or 1 when `conf/masters` has fewer than 3 lines",
    "raft.password": "`cluster.secret`",
    "rest.ssl.ca": "the system's CAs",
}

# Keys that stand for a family (not in KEYS: passed through as they are).
PATTERNS: dict[str, str] = {
    "spark.conf.<key>": (
        "Passed as `--conf <key>=<value>` to the Connect server and to every classic job's "
        "driver (a job's own `spark-conf` wins)."),
}

DESCRIPTIONS: dict[str, str] = {
    "rest.bind-address": "Address the REST server binds to. The port comes from `masters`.",
    "rest.max-body-size": "Largest request body or artifact. A larger one gets 413.",
    "rest.write-timeout": (
        "How long a client's write (a submission, a cancel, a SQL statement recorded...) waits "
        "for Raft to commit and apply it. After that the answer is 503 and the outcome is "
        "unknown."),
    "rest.max-connections": (
        "Open REST connections a peer holds at once (idle keep-alive ones included). A "
        "connection past it gets `503 {\"errors\": [...]}` naming the key and is closed. A tenth "
        "of it (at least 8) is kept for the cluster's peers (connections from the addresses of "
        "`conf/masters`' hosts): others are refused once the rest is taken, so clients cannot "
        "cut heartbeats and fetches. `0`: no limit."),
    "rest.max-connections-per-source": (
        "Open REST connections from one address (peers excepted); past it, `503` naming the "
        "key. Behind a load balancer or ingress every client has its address: raise it, or `0` "
        "(no limit)."),
    "rest.keepalive-timeout": (
        "A REST connection with no request in progress is closed after this long: idle between "
        "requests, or still without a whole first request (a client that connects and sends "
        "nothing, or sends its headers a byte at a time, holds no connection for longer)."),
    "jobmanager.slots": "Slots this peer offers.",
    "jobmanager.data-dir": (
        "Parent of the per-peer data folders: Raft journal, blobs, per-attempt files."),
    "jobmanager.lease-timeout": (
        "A peer without an acknowledged heartbeat for this long stops all its job processes "
        "(its zygote enforces it even if the peer is frozen)."),
    "jobmanager.cancel-timeout": (
        "Grace time between SIGTERM (sets `ctx.stop_requested`) and SIGKILL."),
    "jobmanager.stop.drain-deadline": (
        "A peer told to stop (SIGTERM, `bin/jobmanager.sh stop`, systemd, a Kubernetes pod's "
        "deletion) drains itself first, like `jm drain --deadline`: its streaming jobs move to "
        "the other peers at a micro-batch boundary, its batch jobs finish, or, still running at "
        "this deadline, run again elsewhere. It stops once it holds no job, at the latest this "
        "long plus `jobmanager.cancel-timeout` and 5 s. Started again, it takes work again. A "
        "second SIGTERM stops it at once; with no other live peer or no Raft leader it stops "
        "without draining. `0`: stop at once, without draining. A supervisor's stop timeout "
        "must exceed this plus 30 s (systemd `TimeoutStopSec`, Kubernetes "
        "`terminationGracePeriodSeconds`)."),
    "jobmanager.result.max-size": (
        "Largest JSON result a job may return. A larger result fails the attempt."),
    "jobmanager.spec.max-size": (
        "Largest job spec (as JSON). REST refuses a larger `POST /jobs` body with 413 naming "
        "this key before reading it (when the client sends its length), and the peer checks the"
        " parsed spec again (also for the CLI). Pass large inputs as files or artifacts."),
    "jobmanager.spec.max-args-size": (
        "Largest `args` of a spec, as compact JSON. A larger one gets 413 naming this key."),
    "jobmanager.spec.max-sql-size": (
        "Largest `sql` text of a spec, in UTF-8 bytes. A larger one gets 413 naming this key."),
    "jobmanager.failure.max-size": (
        "Largest failure text kept per field (the exception message keeps its head, the "
        "traceback its tail), in UTF-8 bytes, with a marker `... [truncated, N bytes]`. Holds "
        "however the job ended: an exception, `sys.exit(<message>)`, an `error.json` the job "
        "wrote itself."),
    "jobmanager.log.level": "`DEBUG`, `INFO`, `WARNING` or `ERROR`.",
    "jobmanager.log.format": (
        "The peer's own log, one line per event: `text` (`... [job=<id> epoch=<n>]` on job "
        "events) or `json` (one object per line: time in UTC as RFC 3339, "
        "`2026-11-26T16:20:00.250Z`, level, logger, node, message, job, epoch, traceback)."),
    "jobmanager.executor.preload": (
        "What the warm parent of the job processes imports before it forks. `pyspark` loads the"
        " Spark Connect client, pandas and pyarrow once, so the first use of `ctx.spark` is "
        "fast. `none` makes each job start cheaper, but the job then pays the pyspark import on"
        " its first use of `ctx.spark`."),
    "jobmanager.placement": (
        "Where new jobs go: `spread` (least-loaded live peer, the work-sharing default), `pack`"
        " (fill the fullest peer that fits first), `leader-only` (every job on the Raft leader,"
        " standbys idle: Flink's classic session behaviour, for comparison), `by-tenant` (a"
        " tenant's jobs together on the peers that already run its work, least-loaded first;"
        " with `spark.connect.share-level: tenant` a tenant has engines on as few peers as"
        " its slots allow)."),
    "jobmanager.executor.nice": (
        "Nice level of the job processes and of the embedded Spark Connect JVM, so that job "
        "work never starves the peer's heartbeats, REST and Raft. `0` leaves it unchanged."),
    "jobmanager.executor.user": (
        "Run job processes as this user (name or uid). Needs a peer running as root: the forked"
        " job process calls `initgroups`/`setgid`/`setuid` before user code, so a job can no "
        "longer signal the peer (`os.kill(-1, 9)` in a job leaves the peer alive). Start-up "
        "fails with a message naming this key if the user does not exist. The job's run "
        "directory and checkpoint directory are given to the user; the data and log "
        "directories, the Python installation and the JobManager sources must be "
        "readable/traversable by it (the peer logs a warning at start when they are not)."),
    "jobmanager.executor.proxy-users": (
        "The users a job may ask to run as (its spec's `proxy-user`, `jm run --proxy-user`, "
        "Livy's `proxyUser`): a list or a comma-separated string. Another user is refused "
        "(403); empty (the default): none. As with `jobmanager.executor.user`, switching "
        "users needs a peer running as root; the job's run and checkpoint directories are "
        "given to that user."),
    "jobmanager.executor.limits.nproc": (
        "Processes and threads one job may have. With a cgroup it is the job's `pids.max` "
        "(exact). Without one it becomes `RLIMIT_NPROC`, which Linux counts over the whole "
        "user: the limit set is the user's task count at the job's start plus this many. Linux "
        "does not apply `RLIMIT_NPROC` to root. `0`: no limit."),
    "jobmanager.executor.limits.address-space": (
        "`RLIMIT_AS` of a job process (size, e.g. `8 gb`). `0` (off) by default: a classic "
        "job's driver JVM (`local[2]`, 1 GB heap) reserves about 3.8 GB of address space, a "
        "Spark Connect client job about 1.1 GB. Prefer `.memory`."),
    "jobmanager.executor.limits.memory": (
        "`memory.max` of the job's cgroup (all its processes, its driver JVM included; swap 0)."
        " Needs a cgroup v2 host. `0`: no limit."),
    "jobmanager.executor.limits.open-files": (
        "`RLIMIT_NOFILE` (soft and hard) of a job process; never above the peer's hard limit "
        "unless the peer runs as root and may raise it (in a container root often may not: "
        "jobs then get the hard limit, and the peer's log says so once, when its job "
        "executor starts). A classic driver JVM opens about 320 files, a Connect "
        "client job about 10. `0`: the peer's."),
    "jobmanager.executor.limits.file-size": (
        "`RLIMIT_FSIZE`: the largest file a job may write (its log included). A longer write "
        "fails with \"File too large\" (EFBIG; Python and the JVMs it starts ignore SIGXFSZ) and "
        "the job fails cleanly. `0`: no limit."),
    "jobmanager.executor.limits.oom-score-adj": (
        "The job processes' `oom_score_adj` (-1000..1000): when the host runs out of memory the"
        " kernel's OOM killer takes a job before the peer. `0`: the peer's."),
    "jobmanager.executor.cgroup": (
        "Give each job process a cgroup v2 of its own (`memory.max`, `pids.max`), removed "
        "(after `cgroup.kill`) when the job ends, where `/sys/fs/cgroup` is a writable cgroup2 "
        "mount with the memory/pids controllers. Where it is not, the peer logs why and jobs "
        "run with the rlimits only."),
    "jobmanager.executor.env-pass": (
        "Names or glob patterns (`MY_*`) of the peer's environment variables that jobs, the "
        "Spark Connect server and the SQL worker see, besides the defaults: what Python, Java, "
        "Spark and Hadoop need (`PATH`, `HOME`, `LANG`/`LC_*`, `TZ`, `PYTHON*`, `JAVA_HOME`, "
        "`SPARK_*`, `PYSPARK_*`, `HADOOP_CONF_DIR`, proxies and CA bundles; the list is "
        "`jm/policy/jobs/jobenv.py`). Everything else, cloud credentials (`AWS_*`, "
        "`GOOGLE_APPLICATION_CREDENTIALS`) included, stays with the peer; `JM_CONF_*` and "
        "`JM_PROPERTIES` (the peer's configuration, with its secrets) never pass."),
    "jobmanager.envs.max-size": (
        "Disk the peer's Python environments of jobs' `requirements` may take (under its data "
        "dir, `envs/`): past it the least recently used environment no job runs with is "
        "deleted (one in use never is; a later job with its set builds it again)."),
    "jobmanager.envs.index-url": (
        "The package index pip builds jobs' environments from (pip's `--index-url`); unset: "
        "pip's own configuration (`pip.conf`, `PIP_INDEX_URL`)."),
    "jobmanager.envs.extra-index-urls": (
        "More indexes pip looks in (`--extra-index-url`), comma-separated."),
    "jobmanager.envs.find-links": (
        "Folders or pages of wheels pip looks in (`--find-links`), comma-separated: an "
        "offline peer's wheelhouse."),
    "jobmanager.envs.build-timeout": (
        "How long one environment's build (pip's resolution, download and install) may take; "
        "past it the jobs waiting for it fail their attempt, saying so."),
    "jobmanager.envs.source-builds": (
        "Let pip build a requirement from its source distribution. Building one runs the "
        "package's own setup code as the peer's user (root where tenants run as their OS "
        "users), so by default pip takes wheels only (`--only-binary :all:`) and a "
        "requirement with no wheel for this platform fails its job, pip saying so."),
    "jobmanager.weight": (
        "This peer's share of the work when rebalancing: peers get used slots in proportion to "
        "their weights."),
    "high-availability.storageDir": (
        "`ctx.checkpoint_dir` is `<dir>/<job id>/checkpoints`. Every peer must reach it (a "
        "local directory on one host; NFS, HDFS or S3 across hosts)."),
    "state.savepoints.dir": (
        "Where savepoints go unless a request names a `target-directory`: a path, or a "
        "`file://`, `s3://`, `gs://` or `hdfs://` URI (remote file systems: [Flink "
        "compatibility](../guide/flink-compatibility.md#savepoint-targets))."),
    "s3.endpoint": (
        "The S3 endpoint of `s3://` savepoints, e.g. `http://minio:9000` for an S3-compatible "
        "store (Flink's key). Unset: the AWS default (or `AWS_ENDPOINT_URL`)."),
    "s3.access-key": (
        "S3 access key; unset: the AWS default credentials (environment, `~/.aws`, instance "
        "role)."),
    "s3.secret-key": "S3 secret key, with `s3.access-key`.",
    "s3.secret-key-file": (
        "Read `s3.secret-key` from the first line of this file instead (as "
        "`rest.auth.token-file`)."),
    "s3.region": "S3 region; unset: the AWS default.",
    "s3.path.style.access": (
        "`true`: bucket in the path (S3-compatible stores); `false`: virtual-host style. Unset:"
        " path style with `s3.endpoint`, else virtual-host."),
    "gs.endpoint": (
        "The endpoint of `gs://` savepoints and applications, e.g. `http://127.0.0.1:4443` for "
        "an emulator."),
    "gs.anonymous": (
        "`true`: no credentials (an emulator, public buckets); `false`: Google's Application "
        "Default Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, the metadata server)."),
    "rebalance.strategy": (
        "`none` (only `POST /cluster/rebalance` moves jobs), `on-join` (rounds after a peer "
        "joins, is undrained or its Spark gets ready, until balanced), `continuous` (a round "
        "every interval)."),
    "rebalance.interval": "Time between rounds, so moved jobs settle before the next one.",
    "rebalance.max-moves-per-round": (
        "Moves per round, and moves in flight at once (drain included)."),
    "rebalance.threshold": (
        "Allowed spread, in slots, of the peers' deviations from their fair share."),
    "jobstore.expiration-time": (
        "Ended jobs (FINISHED, FAILED, CANCELED) are forgotten after this, as in Flink's job "
        "store."),
    "jobstore.max-capacity": (
        "At most this many ended jobs are kept; the oldest are forgotten first."),
    "jobmanager.cleanup.interval": (
        "How often each peer's janitor deletes the files nothing needs any more: run and log "
        "folders of jobs the job store forgot (after `jobstore.expiration-time`), blobs no job "
        "refers to, and (on the Raft leader) the forgotten jobs' checkpoint folders and surplus"
        " savepoints. `0` turns the deletion off."),
    "jobmanager.blob.grace-period": (
        "A blob (uploaded artifact) no job in the job store refers to is deleted once "
        "unmodified for this long. An upload not yet used by a submitted job is younger than "
        "that; uploading the same file again makes it young again. Submit within this time "
        "after uploading; then the artifact is forgotten (`GET /artifacts` no longer lists it)."),
    "state.savepoints.num-retained": (
        "Savepoints kept per job in `state.savepoints.dir` (the newest ones); older ones are "
        "deleted, except pinned ones: a savepoint a job in the job store resumes from "
        "(`savepoint-path`), each job's last completed savepoint, and any savepoint holding a "
        "`_pinned` file (`touch <location>/_pinned`). `0` keeps all. Savepoints written to "
        "another `target-directory` are never deleted."),
    "jobmanager.job-log.max-size": (
        "Largest log file of a job's run (`attempt-<epoch>-<restart>.log`), and of the peer's "
        "child processes' logs (`zygote.log`, `spark-connect.log`, `sql-worker.log`). A larger "
        "one is cut in place to its first quarter, a line `[jobmanager: N bytes of this log "
        "dropped here ...]` and its last half. An attempt whose job restarts over and over "
        "keeps its first and newest runs' logs and at most this much of the runs in between "
        "(the oldest go first). `0`: no cap; else at least `16 kb`."),
    "jobmanager.job-log.check-interval": (
        "How often the logs are checked against `jobmanager.job-log.max-size` (a job printing "
        "very fast can exceed the cap by what it writes in this time)."),
    "jobmanager.job-log.stdout": (
        "Also write every line a job process prints (its stdout and stderr, as in its job log) "
        "to the peer's own stdout, one line each with the job's id and the attempt "
        "(`<epoch>-<restart>`) in front (as a JSON object with `job`, `attempt` and `line` "
        "when `jobmanager.log.format` is `json`): a container's log then has its jobs' output. "
        "Lines longer than 16 kb are cut."),
    "jobmanager.streaming.progress-interval": (
        "How often at most a streaming job's last progress (from a StreamingQueryListener in "
        "its job process: last batch, rows per second, batch duration, state rows) is "
        "committed to the replicated state, per job; progress in between is coalesced into "
        "the next report. `jm status`, the web UI and the `jm_job_*` metrics show it."),
    "jobmanager.disk.min-free": (
        "Less free space than this (a size, or a percentage of the file system like `5%`) on "
        "the peer's data or log folder is a warning: `/healthz` shows it in `disk-low` (the "
        "answer stays 200) and the peer logs it once."),
    "heartbeat.interval": (
        "How often each peer sends a heartbeat to the leader. The leader commits the heartbeats"
        " of every peer as one Raft entry each half interval, so the Raft log does not grow "
        "with the number of peers."),
    "heartbeat.timeout": "The leader declares a peer dead after this long without a heartbeat.",
    "restart-strategy.type": (
        "`none`, `fixed-delay`, `exponential-delay` or `failure-rate`, for every job (a job "
        "spec's `restart-strategy` wins). Unset, it depends on the job, as in Flink without "
        "and with checkpointing and as spark-submit never retries: a batch or application "
        "job fails at its first failure (`none`), a streaming job restarts (`fixed-delay` "
        "with the `restart-strategy.fixed-delay.*` values). Whatever the strategy, a failure "
        "no restart can pass is never restarted: the job's code does not compile or an "
        "import fails, its script or entry function is missing, or it exits non-zero "
        "before its Spark application started (an argparse usage error)."),
    "restart-strategy.fixed-delay.attempts": "Restarts allowed.",
    "restart-strategy.fixed-delay.delay": "Pause before each restart.",
    "restart-strategy.exponential-delay.initial-backoff": "First pause.",
    "restart-strategy.exponential-delay.max-backoff": "Longest pause.",
    "restart-strategy.exponential-delay.backoff-multiplier": (
        "Growth factor per failure: a finite number from 1 to 100."),
    "restart-strategy.exponential-delay.reset-backoff-threshold": (
        "After this long without a failure, the backoff starts again at the initial value."),
    "restart-strategy.exponential-delay.jitter-factor": (
        "Random ± share of the pause: a finite number from 0 to 1."),
    "restart-strategy.exponential-delay.attempts-before-reset-backoff": (
        "Failures allowed between two resets."),
    "restart-strategy.failure-rate.max-failures-per-interval": (
        "Failures tolerated in one interval."),
    "restart-strategy.failure-rate.failure-rate-interval": "The interval.",
    "restart-strategy.failure-rate.delay": "Pause before each restart.",
    "env.pid.dir": "Where `jobmanager.sh` keeps pid files.",
    "env.log.dir": "Peer stdout logs, plus one log folder per peer.",
    "env.log.max-size": (
        "The peer's own log (`<env.log.dir>/jm-<user>-<host>_<rest-port>.log`, when started by "
        "`bin/jobmanager.sh`) rotates at this size (`.1`, `.2`, ...). `0`: never. Not used with"
        " `start-foreground` (the log goes to the terminal)."),
    "env.log.max-files": "Rotated files of the peer's own log kept.",
    "env.ssh.opts": (
        "Options `start-cluster.sh` / `stop-cluster.sh` give `ssh` for peers on other hosts, "
        "split as a shell would (e.g. `-p 2222 -i ~/.ssh/jm_key`)."),
    "spark.master": (
        "The Spark cluster: `--master` of the embedded Spark Connect server and of every "
        "classic job's driver. `local[N]`, `spark://host:port` (standalone), "
        "`k8s://https://host:port` or `yarn`, as for spark-submit (see [Application "
        "mode](../guide/application-mode.md#the-spark-cluster))."),
    "spark.remote": (
        "An existing Spark Connect endpoint (`sc://host:port`, with `/;token=...` if it "
        "requires one). When set, no embedded server starts."),
    "spark.connect.embedded": "Start one Spark Connect server per peer.",
    "spark.connect.port": (
        "Port of the embedded server. `0` picks a free port. A fixed port works only with one "
        "peer per host."),
    "spark.connect.token": (
        "The bearer token the embedded Spark Connect server requires of every client "
        "(`spark.connect.authenticate.token`). Unset: a random one at each peer start, which "
        "only that peer's jobs and SQL worker get (`SPARK_CONNECT_AUTHENTICATE_TOKEN` in their "
        "environment, never on a command line): another local user cannot run SQL or Python "
        "UDFs as the peer's user. Set it (or `spark.connect.token-file`) only to let other "
        "clients in: `sc://localhost:PORT/;token=...` (pyspark sends a token without TLS only "
        "to `localhost`)."),
    "spark.connect.token-file": (
        "Read `spark.connect.token` from the first line of this file instead (as "
        "`rest.auth.token-file`)."),
    "spark.connect.cores": (
        "Cores the embedded Connect server's application takes from a Spark cluster (its "
        "`spark.cores.max`; `0`: no limit). Without a limit a standalone application takes "
        "every free core and the other peers' servers and the jobs' applications wait. Not used"
        " with `local[...]`."),
    "spark.connect.startup-timeout": (
        "A JVM that is not up by then is restarted. It is also the longest time a job waits for"
        " Spark to be ready."),
    "spark.connect.share-level": (
        "Which work shares a Spark Connect server (an engine), as Apache Kyuubi's engine share "
        "levels: `peer` (one per peer for everyone, started with the peer), `tenant` (one per "
        "tenant on each peer that has its work, started when its first job or session "
        "arrives), `job` (one per connect-mode job; sessions use their tenant's). See the "
        "security guide for what each level isolates and costs."),
    "spark.connect.engine.idle-timeout": (
        "A tenant's or a job's engine that no job or session has used for this long is "
        "stopped (at least 10 s). The peer's engine (`share-level: peer`) is kept."),
    "spark.connect.engine.max-per-peer": (
        "The most engines a peer runs at once. Work that needs another one stops the least "
        "recently used idle engine first, and waits while every engine is in use."),
    "spark.connect.endpoint.enabled": (
        "Whether the peer serves Spark Connect clients (`SparkSession.builder.remote("
        "\"sc://peer:15002/;token=...\")`): an authenticated front that passes each Connect "
        "session to an engine of this peer (its tenant's at `share-level: tenant`). Callers "
        "show the cluster's credentials as the URL's `token` (`rest.auth.token`, a token of "
        "`jm token create` with the submit role, or a JWT); over TLS with the REST "
        "certificate where `rest.ssl.enabled` is true. Off on a peer without Spark."),
    "spark.connect.endpoint.port": (
        "Port of the Spark Connect endpoint (Spark's own default, 15002); on the host of "
        "`rest.bind-address`. `0` picks a free port (several peers on one host); `GET /nodes` "
        "shows each peer's `connect-endpoint`. A port that is taken stops the peer at start."),
    "spark.connect.endpoint.max-sessions": (
        "Connect sessions one peer's endpoint serves at once (0: no limit); more are refused "
        "with RESOURCE_EXHAUSTED. A tenant's sessions also count against its session quota "
        "(`jm tenant set T --sessions N`). An idle session closes after "
        "`sql-gateway.session.idle-timeout`."),
    "spark.driver.memory": "Driver memory of each embedded server (engine).",
    "spark.log.level": "log4j root level of the embedded server.",
    "spark.class-archive": (
        "A class-data archive of Spark's JVM (the JDK's AppCDS) that the peer's Spark JVMs "
        "(its engines and classic jobs' drivers) map at their start: a Connect server was up "
        "in 2.8 s instead of 6.5 s here, with half the CPU. Make it once per host with `python "
        "-m jm.runtime.classarchive PATH` (again after an upgrade of Java or pyspark: a JVM "
        "ignores an archive that does not match and starts as without one). Empty: none."),
    "spark.executor-wait-warning": (
        "A Spark application that has had no executor for this long says so: a classic job's "
        "own, or the peer's Connect server for the connect-mode jobs running on it. It shows in"
        " `GET /jobs/<id>` (`spark-waiting`), `/exceptions`, `jm status` and the web UI."),
    "sql.max-result-rows": "Rows kept from a SQL job's result.",
    "sql-gateway.session.idle-timeout": (
        "A SQL session without a request for this long is closed by its peer."),
    "sql-gateway.livy-session.idle-timeout": (
        "A Livy interactive session (`POST /sessions`) without a new statement or a running "
        "one for this long is closed by its peer, its Python variables with it (Livy's "
        "`livy.server.session.timeout`)."),
    "sql-gateway.livy-session.max-waiting-statements": (
        "Statements of one Livy session waiting or running at most; one more is a 429 with "
        "Retry-After (0: no limit)."),
    "sql-gateway.livy-session.statement-timeout": (
        "A Livy statement running longer is cancelled (its output says so) and the session "
        "goes on with the next one. Unset: no limit."),
    "sql-gateway.max-sessions": (
        "SQL sessions one peer holds at most (`0`: no limit); a new session goes to the peer "
        "holding the fewest."),
    "sql-gateway.max-statement-size": (
        "Largest SQL statement a session takes (UTF-8 bytes); larger is a 413 naming this key, "
        "refused before the request is parsed. A request's body may hold this much plus 64 KB "
        "(its configuration); a session's properties together at most 64 KB."),
    "sql-gateway.worker-threads": "Statements a peer's SQL worker runs at once.",
    "sql-gateway.page-rows": "Rows per result page (`nextResultUri`).",
    "sql-gateway.fetch-wait": (
        "How long a result request waits for a running statement before it answers `NOT_READY`."),
    "raft.voters": (
        "How many peers vote in Raft and hold its log durably (the voting core): the first "
        "lines of `conf/masters` when the cluster is created, and members added with `jm "
        "cluster add-peer` while there are fewer. Every other peer is a non-voting member: it "
        "gets the replicated state from the leader, serves REST, runs jobs and the SQL gateway "
        "like any peer, but never counts in a quorum, so commits and elections cost the same at"
        " 25 peers as at 3. Odd, at least 1, at most the lines of `conf/masters` (else a "
        "configuration error, exit 2); unset with fewer than 3 lines: 1 (a 2-peer cluster is "
        "one voter and one non-voter). `jm cluster` shows each peer's role."),
    "raft.voter-replace-after": (
        "A voter declared dead this long leaves the voters when a live non-voting member can "
        "take its place; the leader then promotes one, so the voting core heals itself (the "
        "dead peer stays a member: back, it is a non-voter). A voter removed with `jm cluster "
        "remove-peer` is replaced at once. `POST /cluster/peers/{node}/promote` promotes by "
        "hand while the core has fewer than `raft.voters`."),
    "raft.commit-timeout": (
        "How long each of a peer's own Raft writes (its registration, its jobs' reports, "
        "membership changes, the resource manager's placements, a Livy statement's end) waits "
        "to be committed and applied before it is tried again or given up."),
    "raft.min-timeout": (
        "The lower end of the Raft election timeout range (the upper end: `raft.max-timeout`); "
        "it must be below `raft.max-timeout`."),
    "raft.max-timeout": (
        "The upper end of the Raft election timeout range (the lower: `raft.min-timeout`). A "
        "member whose timeout passes first asks the others (pre-vote) and campaigns only if a "
        "majority would vote for it: a restarted or briefly starved follower does not depose a "
        "live leader. `heartbeat.interval` + `raft.max-timeout` must not exceed "
        "`jobmanager.lease-timeout`, so that a leader election never outlasts the other peers' "
        "leases (their jobs keep running while a new leader is elected)."),
    "raft.append-entries-period": "Leader's append-entries period.",
    "raft.leader-fallback-timeout": "A leader cut off from the majority steps down after this.",
    "raft.connection-retry-time": "Pause between Raft reconnect attempts.",
    "raft.use-batch": "Batch append entries: more throughput, more latency.",
    "raft.fsync": (
        "An acknowledged write (a 202, a status change, a lease renewal) is on disk on a "
        "majority of the peers: each peer fsyncs its Raft journal before it answers for an "
        "entry (one fsync for all the entries of a tick). `false`: a killed peer still loses "
        "nothing, but a power cut of a majority can lose acknowledged writes. Cost: see [Known "
        "limits](../guide/known-limits.md)."),
    "raft.password": (
        "Encrypts and authenticates Raft traffic (uses the `cryptography` package, installed "
        "with the project). Use the same value on every peer."),
    "raft.password-file": (
        "Read `raft.password` from the first line of this file instead (as "
        "`rest.auth.token-file`)."),
    "raft.max-message-size": (
        "Largest Raft frame a peer reads from another member (pysyncobj sends at most ~64 kb at"
        " a time, plus the largest single command; snapshots go in 64 kb parts). A longer one "
        "is refused before it is read, and so is one that unpacks past it; the connection is "
        "dropped with a log line. At least `1 mb`. Before a connection has said which member it"
        " is, a frame may be 64 kb at most."),
    "raft.max-connections": (
        "Inbound Raft connections a peer holds at once; `0`: 4 per voter and peer, at least 16."
        " At the limit, a connection that has not said which member it is makes room (oldest "
        "first), else the new one is closed at once. A connection that does not say which "
        "member it is within the connection timeout (3.5 s) is closed."),
    "rest.auth.token": (
        "When set, every endpoint but `/healthz` and the web UI shell (`/`, `/static/`) needs "
        "`Authorization: Bearer <token>`; otherwise 401."),
    "rest.auth.token-file": (
        "Read the token from the first line of this file instead. Like every `*-file` secret, "
        "the file must be a regular file no other user can read or write (`chmod 600`; group "
        "access is allowed, as Kubernetes gives it with `fsGroup`), or the peer does not start;"
        " setting both the key and its file is an error too."),
    "rest.auth.jwt.key-file": (
        "With `rest.auth.token` set: also accept JSON Web Tokens as bearers, signed by an "
        "identity provider whose public key (PEM) or key set (JWKS JSON, keys chosen by "
        "`kid`) is in this file (RS256/384/512, ES256/384/512, PS256/384/512; read again when "
        "it changes). The token must carry `exp`; its role and tenant are its claims below "
        "(rest/roles.py). `rest.auth.jwt.issuer` or `rest.auth.jwt.audience` must be set."),
    "rest.auth.jwt.issuer": "The JWT's `iss` must be this (unset: not checked).",
    "rest.auth.jwt.audience": "The JWT's `aud` must name this (unset: not checked).",
    "rest.auth.jwt.role-claim": (
        "The claim holding the JWT's role: `read`, `submit` or `admin` (a dotted path reads a "
        "nested claim); a verified JWT without one of these is a 403."),
    "rest.auth.jwt.tenant-claim": (
        "The claim holding the JWT's tenant. A token without it (or with an empty one) is "
        "refused (401) unless `rest.auth.jwt.default-tenant` is set."),
    "rest.auth.jwt.jwks-url": (
        "Instead of `rest.auth.jwt.key-file`: the identity provider's JWKS URL, fetched at "
        "the first JWT and again (at most every 30 s) when a token names a key it does not "
        "have, so the provider can rotate keys without a restart."),
    "rest.auth.jwt.default-tenant": (
        "The tenant of a verified JWT that names none; `*`: every tenant (as a token made "
        "without a tenant). Unset: such a token is refused (401)."),
    "rest.auth.jwt.max-lifetime": (
        "A JWT living longer than this (`exp` - `iat`, or `exp` - now without `iat`) is "
        "refused; `exp`, `nbf` and `iat` are checked with 60 s of leeway."),
    "rest.auth.jwt.role-map": (
        "Maps the role claim's values (an identity provider's role or group names; a list "
        "claim of groups gives its strongest role) to roles: `platform=admin,etl=submit,"
        "analysts=read`. A value that is a role's own name is that role."),
    "rest.audit.max-files": (
        "Rotated audit logs kept beside `audit.log` (`audit.log.1` .. `.N`, 16 MB each)."),
    "rest.audit.syslog": (
        "Also send every audit entry to syslog (facility auth, tag `jobmanager-audit`), for "
        "shipping off the host: `udp://host:port` or a Unix socket's path (`/dev/log`)."),
    "cluster.secret": (
        "Shared by the peers: the Raft password (unless `raft.password` is set) and the source "
        "of the credential peers show each other over HTTP (artifact and log fetches; derived "
        "with HMAC, never the secret itself). A peer with another secret cannot join. A peer on"
        " a non-loopback address needs it (see [Security](../guide/security.md))."),
    "cluster.secret-file": (
        "Read `cluster.secret` from the first line of this file instead (as "
        "`rest.auth.token-file`)."),
    "cluster.protocol-version": (
        "The Raft protocol this peer registers with (default: its build's newest). The "
        "cluster runs the lowest protocol of its registered peers, and features of a newer "
        "one (tenants, named pipelines, proxy users) are refused with a 409 until every "
        "peer speaks it. Set it to the old build's protocol on the new peers of a rolling "
        "upgrade to hold those features back until no rollback is needed (as Kafka's "
        "`inter.broker.protocol.version`); once the cluster runs a protocol, a peer of an "
        "older one cannot register ([Operations](../guide/operations.md#rolling-upgrades))."),
    "cluster.seed-wait": (
        "How long a starting peer without Raft data asks its seeds again while none can say "
        "whether the cluster knows it ([Security](../guide/security.md#amnesia-guard): the "
        "amnesia guard); then it refuses to start."),
    "security.insecure": (
        "Let a peer listen beyond loopback without `rest.auth.token` and `cluster.secret` (it "
        "refuses to start otherwise); logs an `INSECURE` warning. For a network only you can "
        "reach."),
    "rest.allowed-hosts": (
        "Host names REST answers to besides its own (`conf/masters` hosts, loopback names, its "
        "host name, literal addresses), e.g. a load balancer's; `*`: any. Checked only without "
        "`rest.auth.token` (DNS rebinding)."),
    "rest.allowed-origins": (
        "Web origins (`https://ui.example.com`) whose pages may send writes; `*`: any. Other "
        "origins' writes get 403."),
    "rest.ssl.enabled": "Serve REST over HTTPS and call the other peers over HTTPS.",
    "rest.ssl.certificate": (
        "PEM certificate chain of this peer (its name or address in `conf/masters`)."),
    "rest.ssl.key": "PEM private key of this peer's certificate (`rest.ssl.certificate`).",
    "rest.ssl.ca": "PEM CA bundle the peers verify each other's certificates with.",
}
