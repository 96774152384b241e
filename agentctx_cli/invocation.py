"""How the commands this CLI prints for a person to copy should name a
program: ``agentctx`` when the shell finds this very one on PATH, else its
path (``.venv/bin/agentctx`` after ``make up``)."""

from __future__ import annotations

import os
import pathlib
import shutil
import sys


def runnable(name: str) -> str:
    """``name`` as the shell runs it: bare when PATH finds the one beside
    this interpreter (or there is none beside it), else that one's path,
    relative to the working directory when it lies under it."""
    beside = pathlib.Path(sys.executable).parent / name
    found = shutil.which(name)
    if not beside.exists() or (found and os.path.samefile(found, beside)):
        return name
    try:
        relative = beside.absolute().relative_to(pathlib.Path.cwd())
    except ValueError:
        return str(beside.absolute())
    return str(relative) if len(relative.parts) > 1 else f"./{relative}"


def agentctx() -> str:
    return runnable("agentctx")
