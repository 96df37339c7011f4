"""Small copies of history files, for sharing or committing (``dqn-slim``). No Lua counterpart."""
from __future__ import annotations

import os

import numpy as np

from .files import printable
from .h5io import from_attr, h5_for_writing, read_errors_as, write_attrs
from .history import HistoryError, load_history, open_history


def slim_history(source: str, target: str, networks=("best_model",), float16: bool = True) -> str:
    """Copy the history ``source`` to ``target`` with fewer or smaller networks (a full file holds two
    float32 networks, 13.8 MB for Pong); return a one-line summary with both sizes in MB, and the
    kept networks' type where it is not float32. No DQN 3.0 counterpart.

    Histories, arguments (where ``source`` has them) and root attributes are copied unchanged,
    text as ``write_attrs`` writes it, except that text that is an absolute path (``csv_log``,
    ``name``...) keeps only its base name: a shared file names no folder of its machine. The
    root attribute ``slimmed_from`` names ``source``. ``target`` may be ``source`` (replaced atomically).

    Args:
        networks: which of ``"model"`` and ``"best_model"`` to keep (each must be in ``source``).
        float16: store the kept networks in float16 (they load back as float32, with Q-values
            about 2e-4 relative off on a trained Pong network); False keeps them as stored.

    Raises:
        HistoryError: ``source`` is not a readable history (damaged included), or lacks one of ``networks``.
        OSError: ``target`` cannot be written.
    """
    attrs = load_history(source).attrs  # validates format and checksums
    size = os.path.getsize(source)
    with open_history(source) as src:
        # What is read before the writing starts, so that an OSError from then on is the target's.
        with read_errors_as(HistoryError, f"{source}: damaged history file"):
            missing = [name for name in networks if name not in src]
            if missing:
                raise HistoryError(f"{source} holds no {' or '.join(missing)} network")
            arguments = {k: from_attr(v) for k, v in src["arguments"].attrs.items()} if "arguments" in src else None
            kept = {name: {key: dataset[()] for key, dataset in src[name].items()} for name in networks}
        with h5_for_writing(target) as dst:
            write_attrs(dst, _without_local_paths({**attrs, "slimmed_from": printable(source)}))
            if arguments is not None:
                write_attrs(dst.create_group("arguments"), _without_local_paths(arguments))
            src.copy(src["history"], dst)  # read whole by load_history: no damage left to meet
            for name, state in kept.items():
                g = dst.create_group(name)
                for key, data in state.items():
                    g.create_dataset(key, data=data.astype(np.float16) if float16 else data, fletcher32=True)
    written = {"float16" if float16 else data.dtype.name for state in kept.values() for data in state.values()}
    types = sorted(written - {"float32"})  # named in the summary: a slim copy's float16 stays float16
    return (f"Wrote {target}: {os.path.getsize(target) / 1e6:.1f} MB (was {size / 1e6:.1f} MB), networks: "
            f"{', '.join(networks) or 'none'}{' in ' + ', '.join(types) if types else ''}")


def _without_local_paths(attrs: dict) -> dict:
    """``attrs`` with each text value that is an absolute path cut to its base name."""
    return {k: os.path.basename(os.path.normpath(v)) if isinstance(v, str) and os.path.isabs(v) else v
            for k, v in attrs.items()}
