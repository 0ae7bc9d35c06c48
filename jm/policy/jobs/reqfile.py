"""A requirements.txt as pip reads it, without its options (pure, standard library only:
`jm run --requirements FILE` reads it on the client's side, the peers check each entry
again with jm/policy/jobs/envs.py)."""
from __future__ import annotations

import re
from typing import Any

MAX_REQUIREMENTS_FILE = 64 * 1024  # bytes of a requirements file
_OPTION = re.compile(r"^\s*-")     # an option line (-r, -e, --index-url ...)


class RequirementsError(ValueError):
    """What is wrong with a set, one line per entry (a 400's errors)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def requirements_file(text: str, name: str = "requirements file") -> list[str]:
    """The entries of a requirements.txt (comments and blank lines dropped, a trailing
    backslash joins lines); RequirementsError for an option line or a file too large."""
    if len(text.encode()) > MAX_REQUIREMENTS_FILE:
        raise RequirementsError([f"{name}: larger than {MAX_REQUIREMENTS_FILE >> 10} KB"])
    out, errors, pending = [], [], ""
    for number, line in enumerate(text.splitlines(), 1):
        line = pending + line
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        if _OPTION.match(line):
            errors.append(f"{name} line {number}: {line.split()[0]} is not taken here (the "
                          "index is the peers' jobmanager.envs.* setting; name each "
                          "requirement)")
            continue
        out.append(line)
    if errors:
        raise RequirementsError(errors)
    return out


def livy_requirements(value: Any) -> list[str]:
    """Livy's `spark.jm.requirements` conf value: one requirement per line (a JSON list
    is a list already). The name Livy clients give in `conf`."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise RequirementsError(["spark.jm.requirements must be requirements, one per "
                                 "line"])
    return requirements_file(value, "spark.jm.requirements")
