"""Shell completion for `jm`, generated from its own argument parser (so it never lags
behind the commands):

    eval "$(jm completion bash)"      # ~/.bashrc
    eval "$(jm completion zsh)"       # ~/.zshrc (through zsh's bashcompinit)
"""
from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh")


def commands(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """command -> its options (and "" -> the options every command takes)."""
    out: dict[str, list[str]] = {"": sorted(o for a in parser._actions
                                            for o in a.option_strings)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                opts = sorted({o for a in sub._actions for o in a.option_strings})
                nested = [n for a in sub._actions if isinstance(a, argparse._SubParsersAction)
                          for n in a.choices]
                out[name] = sorted(nested) + opts
    return out


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    table = commands(parser)
    names = " ".join(sorted(k for k in table if k))
    cases = "\n".join(f'        {name}) words_="{" ".join(opts)}" ;;'
                      for name, opts in sorted(table.items()) if name)
    body = f"""# jm shell completion ({shell}): eval "$(jm completion {shell})"
_jm_complete() {{
    local cur cmd i words_
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            -*) ;;
            *) cmd="${{COMP_WORDS[i]}}"; break ;;
        esac
    done
    if [ -z "$cmd" ]; then
        COMPREPLY=($(compgen -W "{names} {" ".join(table[""])}" -- "$cur"))
        return 0
    fi
    case "$cmd" in
{cases}
        *) words_="" ;;
    esac
    COMPREPLY=($(compgen -W "$words_" -- "$cur") $(compgen -f -- "$cur"))
}}
complete -F _jm_complete jm
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body
