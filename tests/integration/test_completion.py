"""Shell completion of the jm CLI (argcomplete) in real bash, zsh and fish: commands,
their sub-commands and options, choices, and job ids from a real cluster."""
import asyncio
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import running
from tests.helpers import ROOT, asubmit_to

FIX = os.path.join(ROOT, "tests", "integration") + "/"
BIN = os.path.dirname(sys.executable)  # the jm script of this environment


def _env(**kw) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_ARGCOMPLETE", "COMP_"))}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env.pop("JM_ADDRESS", None)
    env.update(kw)
    return env


def _run(args, env, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, **kw)


def bash_complete(line: str, env: dict) -> list[str]:
    """What bash offers for `line` (the cursor at its end), through the function that
    `jm completion bash` registers, as bash calls it on TAB."""
    script = f"""
eval "$(jm completion bash)"
fn=$(complete -p jm | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p')
COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
"$fn" jm "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    r = _run(["bash", "-c", script], env)
    assert r.returncode == 0, r.stderr
    return [w.strip() for w in r.stdout.splitlines() if w.strip()]


def fish_complete(line: str, env: dict) -> list[str]:
    r = _run(["fish", "-c", f"jm completion fish | source; complete -C {line!r}"], env)
    assert r.returncode == 0, r.stderr
    return [w.split("\t")[0] for w in r.stdout.splitlines() if w.strip()]


def test_commands_sub_commands_options_and_choices_in_bash():
    env = _env()
    top = bash_complete("jm ", env)
    assert {"submit", "run", "pipeline", "sessions", "completion", "status"} <= set(top)
    assert bash_complete("jm pip", env) == ["pipeline"]
    assert set(bash_complete("jm pipeline ", env)) == {
        "apply", "list", "status", "history", "rollback", "delete"}
    assert "--wait" in bash_complete("jm cancel --w", env)
    assert "--address" in bash_complete("jm list --", env)
    assert set(bash_complete("jm completion ", env)) == {"bash", "zsh", "fish"}
    assert set(bash_complete("jm sessions --kind ", env)) == {"sql", "livy", "connect"}


@pytest.mark.skipif(not shutil.which("fish"), reason="fish is not installed (bin/test.sh)")
def test_fish_completes_commands_and_choices():
    env = _env()
    assert "pipeline" in fish_complete("jm pip", env)
    assert set(fish_complete("jm completion ", env)) == {"bash", "zsh", "fish"}


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed (bin/test.sh)")
def test_zsh_loads_the_script_and_gets_completions():
    env = _env()
    r = _run(["zsh", "-c", 'autoload -U compinit && compinit -u && '
                           'eval "$(jm completion zsh)" && print loaded'], env)
    assert r.returncode == 0 and r.stdout.strip() == "loaded", r.stderr
    # what the zsh function asks jm (argcomplete's protocol, in zsh's format)
    line = "jm completion "
    r = _run(["bash", "-c", "jm 8>&1 9>/dev/null"], _env(
        _ARGCOMPLETE="1", _ARGCOMPLETE_SHELL="zsh", COMP_LINE=line,
        COMP_POINT=str(len(line)), _ARGCOMPLETE_IFS="\n"))
    assert r.returncode == 0, r.stderr
    offered = {w.split(":")[0] for w in r.stdout.splitlines() if w}
    assert offered == {"bash", "zsh", "fish"}, r.stdout


async def test_job_ids_come_from_the_cluster(tmp_path):
    async with running(str(tmp_path), 1) as c:
        jid = await asubmit_to(c, {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
        env = _env(JM_ADDRESS=c.url(0))
        offered = await asyncio.to_thread(bash_complete, "jm status ", env)
        assert jid in offered, offered
        offered = await asyncio.to_thread(bash_complete, f"jm logs {jid[:6]}", env)
        assert offered == [jid], offered
    # no peer answers: no job id, and no error in the shell
    gone = await asyncio.to_thread(bash_complete, "jm status ", _env(JM_ADDRESS=c.url(0)))
    assert jid not in gone


def test_completion_without_argcomplete_says_what_to_install(tmp_path):
    blocker = tmp_path / "argcomplete.py"
    blocker.write_text("raise ImportError('not installed')\n")
    r = _run([sys.executable, "-m", "jm.client.cli", "completion", "bash"],
             _env(PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}"), cwd=ROOT)
    assert r.returncode == 2 and "pip install argcomplete" in r.stderr, r.stderr
