"""How long bin/jobmanager.sh stop waits for a peer after SIGTERM before it kills it: the
peer drains first (jobmanager.stop.drain-deadline, jm/policy/members/stopdrain.py), then stops.

    python -m jm.local.stopgrace --conf-dir conf [-D key=value ...]   # prints whole seconds
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Optional

from jm.config import ConfigError, load_config, parse_overrides
from jm.policy.members.stopdrain import stop_grace


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="jm.local.stopgrace")
    ap.add_argument("--conf-dir", required=True)
    ap.add_argument("-D", dest="overrides", action="append", default=[])
    args = ap.parse_args(argv)
    try:
        conf = load_config(args.conf_dir, parse_overrides(args.overrides),
                           home=os.environ.get("JM_HOME"))
    except ConfigError as exc:
        print(f"stopgrace: {exc}", file=sys.stderr)
        return 2
    print(math.ceil(stop_grace(conf["jobmanager.stop.drain-deadline"],
                               conf["jobmanager.cancel-timeout"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
