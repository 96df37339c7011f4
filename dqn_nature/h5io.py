"""HDF5 files as the package writes and reads them (histories, parameter files, checkpoints):
written under a temporary name and renamed, text attributes as fixed-length UTF-8, and what
reading a damaged or foreign file raises turned into one-line errors. No Lua counterpart
(``torch.save`` and ``torch.load`` wrote and read ``.t7`` files)."""
from __future__ import annotations

import contextlib
import errno
import os
import re

import h5py
import numpy as np

from .files import atomic_path

# h5py.File options for writing. Files carry HDF5 checksums, of the metadata (the 1.10 file format)
# and of every dataset (Fletcher-32), so a damaged file fails to load instead of giving wrong numbers.
# No chunk cache: a full disk then fails the write itself rather than h5py's clean-up.
WRITE_OPTIONS = dict(libver="v110", rdcc_nbytes=0)
# What reading a damaged or foreign HDF5 file raises: h5py's OSError for data that fails its
# checksum, RuntimeError for metadata that does (links, attributes), KeyError for a missing
# object, and ValueError, TypeError or OverflowError (an infinite count) for contents of the wrong kind.
READ_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError, OverflowError)


@contextlib.contextmanager
def read_errors_as(error: type[Exception], prefix: str):
    """Within the block, what reading a damaged HDF5 file raises (``READ_ERRORS``) becomes one
    ``error("<prefix> (<reason>)")``; an ``error`` raised in the block passes as it is. No Lua
    counterpart."""
    try:
        yield
    except error:
        raise
    except READ_ERRORS as e:
        raise error(f"{prefix} ({e})") from None


def write_attrs(obj, values: dict) -> None:
    """Set attributes of ``obj`` (an ``h5py`` file, group or dataset) from ``values``: None as an empty
    string, strings as fixed-length UTF-8, which live in the object's header under the checks that end
    in a one-line error (h5py's default variable-length strings live in the file's global heap, where a
    few damaged bytes can make HDF5 2.0.0 loop forever). No Lua counterpart.

    Raises:
        TypeError: a value h5py cannot store as an attribute.
    """
    for key, value in values.items():
        value = "" if value is None else value
        if isinstance(value, str):
            data = value.encode()
            obj.attrs.create(key, np.array(data), dtype=h5py.string_dtype("utf-8", max(1, len(data))))
        else:
            obj.attrs[key] = value


def from_attr(value):
    """An HDF5 attribute as a Python value: bytes decoded, NumPy scalars unwrapped, "" as None."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, np.generic):
        value = value.item()
    return None if value == "" else value


@contextlib.contextmanager
def h5_for_writing(path: str):
    """Yield an ``h5py.File`` open for writing under ``atomic_path(path)``: ``path`` is replaced
    once the file is complete and closed. No Lua counterpart (``torch.save`` wrote in place).

    Raises:
        OSError: the file cannot be written (the previous file is left intact). On a full disk
        h5py's closing of the file fails too (RuntimeError); the write's OSError is raised, or
        one with the errno that h5py's message names when the closing alone failed.
    """
    with atomic_path(path) as tmp:
        f = h5py.File(tmp, "w", **WRITE_OPTIONS)
        try:
            yield f
        except BaseException:
            with contextlib.suppress(RuntimeError, OSError):
                f.close()
            raise
        try:
            f.close()
        except RuntimeError as e:
            found = re.search(r"errno = (\d+)", str(e))
            code = int(found[1]) if found else errno.EIO
            raise OSError(code, os.strerror(code)) from None


def open_checked(path: str, fmt: str, kind: str, error: type[Exception]) -> h5py.File:
    """``path`` open for reading (an ``h5py.File`` for the caller to close), an HDF5 file whose ``format``
    attribute is ``fmt`` (a dqn_nature ``kind`` file: "history", "checkpoint"). No Lua counterpart.

    Raises:
        ``error``, one line naming ``path``: no such file, a folder, a pipe or device, not
        readable as HDF5 (damaged or truncated), root attributes that cannot be read
        (damaged), or another format.
    """
    if not os.path.exists(path):
        raise error(f"{path}: no such file")
    if os.path.isdir(path):
        raise error(f"{path}: a folder, not a {kind} file")
    if not os.path.isfile(path):  # HDF5 would wait for ever on a pipe's writer
        raise error(f"{path}: not a regular file (a pipe or a device), not a {kind} file")
    try:
        f = h5py.File(path, "r")
    except READ_ERRORS as e:
        raise error(f"{path}: not a readable HDF5 file, damaged or truncated ({e})") from None
    try:
        with read_errors_as(error, f"{path}: damaged {kind} file"):
            found = from_attr(f.attrs.get("format"))
        if found != fmt:
            raise error(f"{path}: not a dqn_nature {kind} file (format attribute {found!r})")
    except error:
        f.close()
        raise
    return f

