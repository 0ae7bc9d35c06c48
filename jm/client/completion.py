"""Shell completion for `jm`, by argcomplete: commands, their sub-commands, options and
choices come from jm's own argument parser (so they never lag behind it), and job ids
from the cluster (the newest, from GET /jobs, within a second or two; none if no peer
answers).

    eval "$(jm completion bash)"      # ~/.bashrc
    eval "$(jm completion zsh)"       # ~/.zshrc
    jm completion fish | source       # ~/.config/fish/config.fish
"""
from __future__ import annotations

import argparse
import os
from typing import Any

SHELLS = ("bash", "zsh", "fish")
JOB_ARGS = ("jobid",)    # positional arguments that name a job
OFFERED = 100            # job ids offered at most (the newest)
QUICK = 2.0              # s: a completion that waits for the cluster no longer


class NoArgcomplete(Exception):
    """argcomplete is not installed (the client's dependency)."""


def script(shell: str) -> str:
    """The shell's code that calls back into `jm` for completions."""
    try:
        import argcomplete
    except ImportError:
        raise NoArgcomplete("shell completion needs argcomplete: pip install argcomplete")
    return argcomplete.shellcode(["jm"], shell=shell)


def job_ids(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The ids of the cluster's newest jobs that start with `prefix` (argcomplete's
    completer protocol); the peers are found as for any command (--address, $JM_ADDRESS,
    conf/masters)."""
    from jm.client.cli_http import CliError, client_for
    try:
        client = client_for(parsed_args, QUICK)
        client.max_attempts = 1
        jobs = client.get(f"/jobs?limit={OFFERED}").get("jobs") or []
    except (CliError, OSError, ValueError, AttributeError):
        return []
    return [j["jid"] for j in jobs if isinstance(j, dict)
            and isinstance(j.get("jid"), str) and j["jid"].startswith(prefix)]


def _with_completers(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if action.dest in JOB_ARGS:
            action.completer = job_ids  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _with_completers(sub)


def complete_if_asked(parser: argparse.ArgumentParser) -> None:
    """When the shell asks for completions (argcomplete's environment): answer them and
    exit; otherwise nothing (not even an import)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:
        return
    _with_completers(parser)
    argcomplete.autocomplete(parser, always_complete_options=False)  # ("-" asks for them)
