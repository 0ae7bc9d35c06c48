"""Helpers for bin/jobmanager.sh: validate the config and resolve a peer's files.

`python -m jm.local.launcher resolve --conf-dir DIR [--peer H:R:F] [-D k=v ...]` prints
`<peer> <pid file> <log file>` (tab-separated) or one error line (exit 2).
`python -m jm.local.launcher peers --conf-dir DIR` prints the masters lines.
`python -m jm.local.launcher ssh-opts --conf-dir DIR [-D k=v ...]` prints the words of
`env.ssh.opts` (split as a shell would), one per line, for bin/cluster.sh's ssh calls.
"""
from __future__ import annotations

import argparse
import getpass
import os
import shlex
import sys

from jm.config import ConfigError, choose_self, load_config, parse_overrides, read_masters


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="jm.local.launcher")
    ap.add_argument("action", choices=["resolve", "peers", "ssh-opts"])
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
        if args.action == "ssh-opts":
            try:
                words = shlex.split(conf["env.ssh.opts"])
            except ValueError as exc:  # e.g. an unbalanced quote
                raise ConfigError(f"env.ssh.opts: {exc}")
            for w in words:
                if "\n" in w:
                    raise ConfigError("env.ssh.opts: an option contains a line break")
                print(w)
            return 0
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
    # tab-separated: the paths may contain spaces (bin/jobmanager.sh reads with IFS=tab)
    print(me, os.path.join(pid_dir, name + ".pid"), os.path.join(log_dir, name + ".log"),
          sep="\t")
    return 0


if __name__ == "__main__":
    sys.exit(main())
