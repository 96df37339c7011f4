"""Checkpoints ``<name>.ckpt``: everything needed to continue a run (no Lua counterpart;
DQN 3.0 kept only its history file).

An HDF5 file: root attributes ``format = "dqn_nature.checkpoint"``, ``format_version``,
``game``, ``step``, ``package_version``, ``has_replay``; group ``arguments`` (as in a
history); group ``state`` (``Trainer.get_state()``: dicts are groups, arrays datasets,
numbers and strings attributes); with ``--checkpoint-replay``, group ``replay`` holding the
replay memory's first ``num_entries`` rows of ``s``, ``a``, ``r``, ``t`` in chunks.
"""
from __future__ import annotations

import h5py
import numpy as np

from . import __version__
from .h5io import from_attr, h5_for_writing, open_checked, read_errors_as, write_attrs

FORMAT = "dqn_nature.checkpoint"
FORMAT_VERSION = 1
CHUNK_ROWS = 16384  # replay rows copied at a time: about 115 MB of frames


class CheckpointError(ValueError):
    """A file that cannot be read as a checkpoint; the message names the file and the problem."""


def _write(group: h5py.Group, values: dict) -> None:
    for key, value in values.items():
        if isinstance(value, dict):
            _write(group.create_group(key), value)
        elif isinstance(value, np.ndarray) or hasattr(value, "detach"):  # an array, or a torch tensor
            data = value if isinstance(value, np.ndarray) else value.detach().cpu().contiguous().numpy()
            group.create_dataset(key, data=data, fletcher32=data.ndim > 0)  # scalars have no checksum
        elif value is not None:  # None: no entry
            write_attrs(group, {key: value})


def _read(group: h5py.Group) -> dict:
    out = {k: from_attr(v) for k, v in group.attrs.items()}
    for key, item in group.items():
        out[key] = _read(item) if isinstance(item, h5py.Group) else item[()]
    return out


def save_checkpoint(path: str, trainer, replay: bool = False, compress: bool = False) -> None:
    """Write ``trainer``'s (a ``train.Trainer``) full state to ``path`` atomically; with ``replay``
    the replay memory too (up to 7 GB, copied ``CHUNK_ROWS`` rows at a time so that memory does
    not double), gzipped (level 1) with ``compress``. No Lua counterpart.

    Raises:
        OSError: the file cannot be written (a previous checkpoint stays intact).
    """
    c = trainer.config
    with h5_for_writing(path) as f:
        write_attrs(f, dict(format=FORMAT, format_version=FORMAT_VERSION, game=c.game, step=trainer.step,
                            package_version=__version__, has_replay=bool(replay)))
        write_attrs(f.create_group("arguments"), c.as_dict())
        _write(f.create_group("state"), trainer.get_state())
        if replay:
            t, group = trainer.agent.transitions, f.create_group("replay")
            n = t.num_entries
            for name in ("s", "a", "r", "t"):
                array = getattr(t, name)[:n]  # a view of the filled rows
                ds = group.create_dataset(name, shape=array.shape, dtype=array.dtype, fletcher32=True,
                                          chunks=(min(1024, n),) + array.shape[1:] if n else None,
                                          compression=1 if compress else None)  # 1: gzip level 1
                for start in range(0, n, CHUNK_ROWS):
                    ds[start:start + CHUNK_ROWS] = array[start:start + CHUNK_ROWS]


def _open(path: str) -> h5py.File:
    return open_checked(path, FORMAT, "checkpoint", CheckpointError)


def read_header(path: str) -> tuple[dict, int]:
    """A checkpoint's stored run options (``config`` names) and the agent step it was written
    at. No Lua counterpart (DQN 3.0 could not resume).

    Raises:
        CheckpointError: missing, unreadable, damaged, truncated or foreign file.
    """
    with read_errors_as(CheckpointError, f"{path}: damaged checkpoint"), _open(path) as f:
        return {k: from_attr(v) for k, v in f["arguments"].attrs.items()}, int(f.attrs["step"])


def read_evaluations(path: str) -> dict[str, np.ndarray]:
    """The histories a checkpoint holds (``history.HISTORY_FIELDS``: one entry per evaluation up
    to its step, ``time_history`` one more). No Lua counterpart.

    Raises:
        CheckpointError: missing, unreadable, damaged, truncated or foreign file.
    """
    with read_errors_as(CheckpointError, f"{path}: damaged checkpoint"), _open(path) as f:
        return {key: dataset[()] for key, dataset in f["state"]["history"].items()}


def restore_checkpoint(path: str, trainer) -> bool:
    """Put the run of checkpoint ``path`` into ``trainer`` (built with its arguments); return
    whether it held the replay memory (read in chunks straight into the table's arrays; if not,
    the memory refills as at the start of a run). No Lua counterpart.

    Raises:
        CheckpointError: damaged, truncated or foreign file.
    """
    with read_errors_as(CheckpointError, f"{path}: damaged checkpoint"), _open(path) as f:
        has_replay = bool(f.attrs.get("has_replay", False))
        trainer.set_state(_read(f["state"]), replay_restored=has_replay)
        if has_replay:
            t = trainer.agent.transitions
            n = t.num_entries
            for name in ("s", "a", "r", "t"):
                ds, array = f["replay"][name], getattr(t, name)
                if ds.shape[0] != n or ds.shape[1:] != array.shape[1:]:
                    raise CheckpointError(f"{path}: replay memory {name} has shape {ds.shape}, expected "
                                          f"({n},) + {array.shape[1:]}")
                for start in range(0, n, CHUNK_ROWS):
                    sel = np.s_[start:min(n, start + CHUNK_ROWS)]
                    ds.read_direct(array, source_sel=sel, dest_sel=sel)
        return has_replay
