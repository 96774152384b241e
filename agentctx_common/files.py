"""Files and directories made with the mode asked for, whatever the umask.

``Path.mkdir(mode=…)`` and ``os.open(…, mode)`` apply the umask (0777 under
``umask 000`` for a plain ``mkdir``, and the parents ``parents=True``
makes never get the mode at all), and ``write_text`` then ``chmod`` leaves
a window in which a key is readable by others. These helpers set the mode
on the descriptor or directory itself before any content is written:

- ``make_dir``: every missing component created with ``mode``; the last
  one, when it exists already, brought to ``mode`` only if ``tighten``
  (ours, like the home's ``data/``; a shared directory is left as it is).
- ``create_file``: a new file only (``O_EXCL``; FileExistsError otherwise).
- ``replace_file``: a new file, or an existing one replaced atomically by a
  new inode, so an old file's wider mode does not survive.
- ``open_append``: a log or journal opened for appending, made ``mode``
  (an existing file too).
"""

from __future__ import annotations

import contextlib
import os
import pathlib

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
PUBLIC_FILE = 0o644  # certificates: readable, never writable, by others


def make_dir(path: pathlib.Path, mode: int = PRIVATE_DIR, *, tighten: bool = True) -> pathlib.Path:
    path = pathlib.Path(path)
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # made meanwhile by someone else: theirs, not tightened here
        os.chmod(directory, mode)
    if not missing and tighten and (path.stat().st_mode & 0o777) != mode:
        os.chmod(path, mode)
    return path


def _write_all(fd: int, data: bytes, mode: int) -> None:
    os.fchmod(fd, mode)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def create_file(path: pathlib.Path, data: bytes, mode: int = PRIVATE_FILE) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        _write_all(fd, data, mode)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)


def replace_file(path: pathlib.Path, data: bytes, mode: int = PRIVATE_FILE) -> None:
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover of a crash: never reused, its mode may be wider
    create_file(tmp, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_append(path: pathlib.Path, mode: int = PRIVATE_FILE) -> int:
    """A descriptor for appending to ``path`` (created if missing), made ``mode``."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def tighten_file(path: pathlib.Path, mode: int = PRIVATE_FILE) -> None:
    """``path`` brought down to ``mode`` when it allows more (a file written
    by an older version); one that is not ours to change is left as it is."""
    with contextlib.suppress(OSError):
        if os.stat(path).st_mode & 0o777 & ~mode:
            os.chmod(path, mode)
