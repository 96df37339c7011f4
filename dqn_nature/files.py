"""Crash-safe file writing: a temporary name in the same folder, fsync, then rename."""
from __future__ import annotations

import contextlib
import csv
import io
import os
import sys
import tempfile
from pathlib import Path


def os_reason(e: OSError) -> str:
    """Why an ``OSError`` happened, in the system's words for its errno (\"Read-only file
    system\"): h5py's own message runs over several lines and names the temporary file."""
    return os.strerror(e.errno) if e.errno else e.strerror or " ".join(str(e).split())


def printable(text: str) -> str:
    """``text`` with the bytes that are not UTF-8 (surrogates in file names and command-line arguments)
    as U+FFFD: text that can be drawn, printed or stored in HDF5."""
    return os.fsencode(text).decode(errors="replace")


def creation_problem(folder: str) -> str | None:
    """Why a file cannot be created in the existing ``folder`` (``os_reason``), or None. A real attempt:
    ``os.access`` says yes to root even on /proc or /sys. No Lua counterpart."""
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as e:
        return os_reason(e)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        pass
    return True


def written_in_place(path: str) -> bool:
    """Whether ``atomic_path`` writes ``path`` directly: an existing non-regular file (device, pipe), or
    any path under /dev or /proc, such as ``/dev/stdout`` redirected to a file: replacing that file
    would drop what the shell writes to it besides. No Lua counterpart."""
    return os.path.abspath(path).startswith(("/dev/", "/proc/")) or (
        os.path.exists(path) and not os.path.isfile(path))


def standard_stream(path: str):
    """``sys.stdout`` or ``sys.stderr``, flushed, when ``path`` names its file (``/dev/stdout``, or where
    it is redirected), else None: to be written through, as a file opened anew has its own offset and
    would write over the lines printed. No Lua counterpart."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # ValueError: no file descriptor (io's)
            if os.path.samestat(os.stat(path), os.fstat(stream.fileno())):
                stream.flush()
                return stream
    return None


def unwritable(path: str) -> str | None:
    """Why the output file ``path`` cannot be written (a folder, no such folder, one where no file can
    be created), checked before the work that makes it, or None. No Lua counterpart."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return "it is a folder"
    if os.path.exists(path) and written_in_place(path):
        return None if os.access(path, os.W_OK) else "not writable"
    if not os.path.isdir(folder):
        return f"no folder {folder}"
    problem = creation_problem(folder)
    return problem and f"folder {folder}: {problem}"


@contextlib.contextmanager
def atomic_path(path: str):
    """Yield a temporary path ``.<name>.tmp<pid>`` beside ``path``; on success it is fsynced and
    renamed to ``path``. A failure leaves any previous ``path`` untouched and removes the temporary;
    the next write of ``path`` removes those of killed processes. A symbolic link is followed; a path
    ``written_in_place`` (``/dev/stdout``) is yielded as it is. Raises what writing raised (``OSError``
    on a full disk). No Lua counterpart (``torch.save`` wrote in place).
    """
    if written_in_place(path):
        yield path
        return
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    prefix = f".{os.path.basename(path)}.tmp"
    for name in os.listdir(folder):
        pid = name[len(prefix):]
        if name.startswith(prefix) and pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(folder, name))
    tmp = os.path.join(folder, prefix + str(os.getpid()))
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    with contextlib.suppress(OSError):  # persist the rename; not possible on every filesystem
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def append_csv_row(path: str, row: dict, first: bool) -> None:
    """Append ``row`` to the CSV file ``path``, after a header from its keys when the file is new or
    empty. A regular file is rewritten atomically (a kill never leaves a partial row), the row on a
    line of its own. A ``standard_stream`` or a path ``written_in_place`` is written to, after the
    header when it is the process's ``first`` row. No Lua counterpart."""
    stream = standard_stream(path)
    in_place = stream is not None or written_in_place(path)
    existing = Path(path).read_bytes() if not in_place and os.path.exists(path) else b""
    header = first if in_place else not existing
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(row))
    if header:
        writer.writeheader()
    writer.writerow(row)
    if stream:
        stream.write(text.getvalue())
        stream.flush()
    elif in_place:
        with open(path, "a", newline="") as fh:
            fh.write(text.getvalue())
    else:
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            fh.write(existing + (b"\n" if existing and not existing.endswith(b"\n") else b""))
            fh.write(text.getvalue().encode())
