"""`python -m jm.peer --conf-dir conf [--peer host:rest:raft] [-D key=value ...]`."""
import sys

from jm.peer.main import main

sys.exit(main())
