"""Trained networks from files: this package's ``.h5`` histories and ``.params.h5`` parameter
vectors, and DQN 3.0's ``.t7`` files.

A ``.params.h5`` file (``--save-network-params``, Lua ``saveNetworkParams``) holds the dataset
``network`` (the flat float32 parameter vector, in the order of the network's ``parameters()``)
and the root attributes ``format = "dqn_nature.params"`` and ``hist_len``.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

import h5py
import numpy as np

from .h5io import from_attr, h5_for_writing, open_checked, read_errors_as, write_attrs
from .history import HistoryError, load_history

if TYPE_CHECKING:  # imported where used: --help needs no torch
    import torch

PARAMS_FORMAT = "dqn_nature.params"
LABELS = {"model": "last network", "best_model": "best network"}  # a history's networks, in words


def save_network_params(path: str, network: torch.nn.Module) -> None:
    """Write the flat float32 parameter vector (Lua ``saveNetworkParams``) to ``path``, atomically,
    with the network's ``hist_len`` as an attribute (the vector's length does not give it).

    Raises:
        OSError: the file cannot be written (the previous file is left intact).
    """
    import torch

    flat = torch.cat([p.detach().cpu().float().reshape(-1) for p in network.parameters()]).numpy()
    with h5_for_writing(path) as f:
        write_attrs(f, {"format": PARAMS_FORMAT, "hist_len": network.conv1.weight.shape[1]})
        f.create_dataset("network", data=flat, fletcher32=True)


def load_network_params(path: str) -> tuple[np.ndarray, int]:
    """The flat float32 parameter vector (P,) and the ``hist_len`` (4 where not stored) of a
    file written by ``save_network_params``. No Lua counterpart (DQN 3.0 never read its
    ``.params.t7`` back).

    Raises:
        HistoryError: missing, unreadable, damaged, or not a dqn_nature parameter file.
    """
    with (read_errors_as(HistoryError, f"{path}: damaged parameter file"),
          open_checked(path, PARAMS_FORMAT, "parameter", HistoryError) as f):
        vector, hist_len = f["network"][()], from_attr(f.attrs.get("hist_len", 4))
    if vector.ndim != 1 or vector.dtype.kind != "f" or not isinstance(hist_len, int) or hist_len < 1:
        raise HistoryError(f"{path}: damaged parameter file (not a vector of floats with a hist_len)")
    return vector, hist_len


def load_network(path: str, best: bool = False, only: Callable[[str], None] | None = None) -> tuple[dict, dict]:
    """``(state, arguments)``: the ``convnet_atari3`` ``state_dict`` stored in ``path`` (the Lua
    ``-network`` flag), float32 tensors (actions: ``state["fc2.weight"].shape[0]``, hist_len:
    ``state["conv1.weight"].shape[1]``), and the options of the run that trained it under ``config``
    names ({} for a vector).

    Args:
        path: a ``.h5`` history, a ``.params.h5`` vector, a DQN 3.0 ``.t7`` snapshot or ``.params.t7`` vector.
        best: take the best evaluated network (``best_model``) instead of the last one.
        only: if given, a history holding only the other network (a ``dqn-slim`` copy, a run
            before its first evaluation) gives that one, after calling ``only`` with its name (which
            may raise instead); without it, such a history raises.

    Raises:
        history.HistoryError (``torch7.LegacyError`` for ``.t7``): a blank path, another suffix,
            a missing or unreadable file, a checkpoint, no such network (with ``only``: a history
            with no network at all) or one that is not ``convnet_atari3``, or ``torchfile`` not
            installed.
    """
    if not path.strip():
        raise HistoryError(f"no network file given (the path {path!r} is blank)")
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".t7":
        from .torch7 import load_t7_network

        return load_t7_network(path, best)
    if path.lower().endswith(".params.h5"):
        from .torch7 import params_state

        vector, hist_len = load_network_params(path)
        if best:
            raise HistoryError(f"{path}: a parameter vector holds one network, not a best one")
        return params_state(vector, path, hist_len=hist_len), {}
    if suffix == ".h5":
        history = load_history(path)
        which = "best_model" if best else "model"
        if only is not None:
            with h5py.File(path, "r") as f:
                held = [name for name in LABELS if name in f]
            if held and which not in held:
                which, = held
                only(which)
        return history.load_network(which).state_dict(), history.arguments
    if suffix == ".ckpt":
        raise HistoryError(f"{path} is a checkpoint, for dqn-train --resume; its run's networks are in the history "
                           f"written beside it, {path[:-5]}.h5")
    raise HistoryError(f"{path}: not a network file (expected a .h5 history, a .params.h5 vector or a DQN 3.0 "
                       ".t7 file)")


def network_misfit(state: dict, game: str, n_actions: int, in_channels: int | None = None) -> str | None:
    """Why the ``convnet_atari3`` ``state`` (as ``load_network`` returns it) cannot play
    ``game``, with ``n_actions`` actions and, when given, ``in_channels`` input channels
    (hist_len x ncols), the only shapes in which such networks differ; None when it fits. No
    Lua counterpart: DQN 3.0 failed in the first forward pass instead."""
    n_net, channels = state["fc2.weight"].shape[0], state["conv1.weight"].shape[1]
    if n_net != n_actions:
        return f"its network has {n_net} actions but {game} has {n_actions}"
    if in_channels is not None and channels != in_channels:
        return f"its network takes {channels} frames per state but hist_len x ncols is {in_channels}"
    return None
