"""Helpers for bin/jobmanager.sh: validate the config and resolve a peer's files.

`python -m jm.local.launcher resolve --conf-dir DIR [--peer H:R:F] [-D k=v ...]` prints
`<peer> <pid file> <log file>` or one error line (exit 2).
`python -m jm.local.launcher peers --conf-dir DIR` prints the masters lines.
"""
from __future__ import annotations

import argparse
import getpass
import os
import sys

from jm.config import ConfigError, choose_self, load_config, parse_overrides, read_masters


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="jm.local.launcher")
    ap.add_argument("action", choices=["resolve", "peers"])
    ap.add_argument("--conf-dir", required=True)
    ap.add_argument("--peer")
    ap.add_argument("-D", dest="overrides", action="append", default=[])
    args = ap.parse_args(argv)
    try:
        masters = read_masters(os.path.join(args.conf_dir, "masters"))
        if args.action == "peers":
            for m in masters:
                print(m)
            return 0
        conf = load_config(args.conf_dir, parse_overrides(args.overrides),
                           home=os.environ.get("JM_HOME"))
        me = choose_self(masters, args.peer)
    except ConfigError as exc:
        print(f"jobmanager: configuration error: {exc}", file=sys.stderr)
        return 2
    name = f"jm-{getpass.getuser()}-{me.host}_{me.rest_port}"
    pid_dir, log_dir = conf.path("env.pid.dir"), conf.path("env.log.dir")
    for d in (pid_dir, log_dir):
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as exc:
            print(f"jobmanager: configuration error: cannot create {d}: {exc.strerror}",
                  file=sys.stderr)
            return 2
    print(me, os.path.join(pid_dir, name + ".pid"), os.path.join(log_dir, name + ".log"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
