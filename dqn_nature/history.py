"""The run history file ``<name>.h5`` (the port of the ``.t7`` that ``train_agent.lua`` saves).

Layout: root attributes ``format``, ``format_version``, ``game``, ``steps``, ``frames``,
``package_version``; group ``history`` (one entry per evaluation, ``time_history`` one
more); groups ``model`` and ``best_model`` (float32 parameters named as in the
network's ``state_dict``; a ``dqn-slim`` copy may hold one or none, in float16, and has the
root attribute ``slimmed_from``); group ``arguments`` (every resolved option as an attribute).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import h5py
import numpy as np

from .config import ConfigError, typed
from .h5io import from_attr, h5_for_writing, open_checked, read_errors_as, write_attrs

if TYPE_CHECKING:  # imported where used: every command imports this module, and --help needs no torch
    import torch

FORMAT = "dqn_nature.history"
FORMAT_VERSION = 1
# Evaluation histories and their dtypes; time_history has one more entry (it starts at 0).
HISTORY_FIELDS = {
    "reward_history": np.float64, "reward_counts": np.int64, "episode_counts": np.int64,
    "v_history": np.float64, "td_history": np.float64, "qmax_history": np.float64,
    "step_history": np.int64, "time_history": np.float64,
}
LUA_HISTORIES = tuple(k for k in HISTORY_FIELDS if k != "step_history")  # those train_agent.lua saves


class HistoryError(ValueError):
    """A file that cannot be read as a history; the message names the file and the problem."""


def save_history(path: str, *, game: str, steps: int, frames: int, history: dict, model: dict,
                 best_model: dict | None, arguments: dict, package_version: str, attrs: dict | None = None) -> None:
    """Write the history ``path`` (.h5) atomically (``torch.save`` of the slim agent in train_agent.lua).

    Args:
        game: ROM id. steps, frames: training steps done and frames (steps x actrep).
        history: every ``HISTORY_FIELDS`` key to a sequence of numbers.
        model, best_model: ``state_dict`` of the network and of the best network (or None).
        arguments: the resolved options (None values are stored as empty strings).
        attrs: further root attributes (strings), such as a converted file's origin.

    Raises:
        OSError: the file cannot be written (the previous file is left intact).
    """
    with h5_for_writing(path) as f:
        write_attrs(f, dict(format=FORMAT, format_version=FORMAT_VERSION, game=game, steps=int(steps),
                            frames=int(frames), package_version=package_version, **(attrs or {})))
        group = f.create_group("history")
        for key, dtype in HISTORY_FIELDS.items():
            group.create_dataset(key, data=np.asarray(history[key], dtype=dtype).reshape(-1), fletcher32=True)
        for name, state in (("model", model), ("best_model", best_model)):
            if state is not None:
                g = f.create_group(name)
                for key, tensor in state.items():
                    g.create_dataset(key, data=tensor.detach().cpu().float().numpy(), fletcher32=True)
        write_attrs(f.create_group("arguments"), arguments)


@dataclasses.dataclass
class History:
    """A loaded history: ``steps`` agent steps trained, ``frames`` = steps x actrep, ``attrs`` all
    root attributes, and the ``HISTORY_FIELDS`` arrays, 1-D integers or floats as the file stores them
    (``HISTORY_FIELDS``' dtypes where ``save_history`` wrote it), one entry per evaluation, ``time_history``
    one more (seconds of training); ``step_history`` in agent steps.
    """

    path: str
    game: str
    steps: int
    frames: int
    package_version: str
    reward_history: np.ndarray
    reward_counts: np.ndarray
    episode_counts: np.ndarray
    v_history: np.ndarray
    td_history: np.ndarray
    qmax_history: np.ndarray
    step_history: np.ndarray
    time_history: np.ndarray
    arguments: dict
    attrs: dict

    @property
    def actrep(self) -> int:
        """Frames per agent step of the run."""
        return int(self.arguments.get("actrep") or 1)

    @property
    def frame_history(self) -> np.ndarray:
        """Training frames at each evaluation: ``step_history * actrep``."""
        return self.step_history * self.actrep

    @property
    def score_history(self) -> np.ndarray:
        """``reward_history`` with NaN at the evaluations that finished no episode, float64, one
        entry per evaluation: DQN 3.0 records 0 there (no total over max(1, 0) episodes), which
        is not a score."""
        return np.where(self.episode_counts > 0, self.reward_history, np.nan)

    def state_dict(self, which: str = "model") -> dict:
        """The stored parameters of ``"model"`` or ``"best_model"`` as float32 tensors (also
        from a slim file's float16 copy).

        Raises:
            HistoryError: the file has no such network (no evaluation yet for best_model, or
            left out by ``dqn-slim``), or is unreadable or damaged.
            ValueError: ``which`` is neither.
        """
        import torch

        if which not in ("model", "best_model"):
            raise ValueError(f"which must be 'model' or 'best_model', not {which!r}")
        with read_errors_as(HistoryError, f"{self.path}: damaged history file"), open_history(self.path) as f:
            if which not in f:
                raise HistoryError(f"{self.path}: no {which} stored ({_missing_network_hint(f, which)})")
            return {k: torch.from_numpy(v[()]).float() for k, v in f[which].items()}

    def load_network(self, which: str = "model") -> torch.nn.Module:
        """The ``convnet_atari3`` network with the stored weights of ``which``.

        Raises:
            HistoryError: missing network, or weights that do not fit the architecture.
            ValueError: ``which`` is neither ``"model"`` nor ``"best_model"``.
        """
        from .convnet import convnet_atari3

        state = self.state_dict(which)
        try:
            net = convnet_atari3(state["fc2.weight"].shape[0], state["conv1.weight"].shape[1])
            net.load_state_dict(state)
        except (KeyError, RuntimeError) as e:
            raise HistoryError(f"{self.path}: {which} is not a convnet_atari3 network ({e})") from None
        return net


def _missing_network_hint(f: h5py.File, which: str) -> str:
    """Why the history ``f`` holds no ``which`` network, and which one it holds."""
    source = from_attr(f.attrs.get("slimmed_from"))
    if which == "best_model" and source is None:
        return "best_model exists after an evaluation"
    other = "model" if which == "best_model" else "best_model"
    if other in f:
        copy = "this history" if source is None else f"this dqn-slim copy of {source}"
        return f"{copy} holds only {other}; load {other!r}"
    if source is None:
        return "it holds no network"
    return f"dqn-slim left the networks out of this copy of {source}"


def open_history(path: str) -> h5py.File:
    """``path`` open for reading (an ``h5py.File`` for the caller to close). Raises HistoryError: no such
    file, not a regular file, not readable as HDF5, or not a history (``h5io.open_checked``)."""
    return open_checked(path, FORMAT, "history", HistoryError)


def load_history(path: str) -> History:
    """Read a history written by ``save_history`` (the counterpart of ``torch.load`` of a DQN
    3.0 ``.t7`` snapshot's histories; ``convert`` reads those).

    Raises:
        HistoryError: missing, unreadable, damaged, or not a dqn_nature history file.
    """
    with read_errors_as(HistoryError, f"{path}: damaged history file"), open_history(path) as f:
        attrs = {k: from_attr(v) for k, v in f.attrs.items()}
        if attrs.get("format_version") != FORMAT_VERSION:
            raise HistoryError(f"{path}: unsupported history format_version {attrs.get('format_version')!r}")
        if missing := [k for k in HISTORY_FIELDS if k not in f.get("history", {})]:
            raise HistoryError(f"{path}: history is missing {', '.join(missing)}")
        arrays = {k: f["history"][k][()] for k in HISTORY_FIELDS}
        for key, values in arrays.items():
            if values.ndim != 1 or values.dtype.kind not in "iuf":
                raise HistoryError(f"{path}: damaged history file ({key} is not a list of numbers)")
        n = len(arrays["step_history"])  # evaluations; time_history has one entry more
        if uneven := [k for k, v in arrays.items() if len(v) != n + (k == "time_history")]:
            raise HistoryError(f"{path}: damaged history file ({', '.join(uneven)}: not one entry per "
                               f"evaluation of step_history's {n})")
        if not isinstance(attrs.get("game"), str):
            raise HistoryError(f"{path}: damaged history file (game attribute {attrs.get('game')!r})")
        step = arrays["step_history"]
        if not (np.isfinite(step) & (step == np.round(step))).all():
            raise HistoryError(f"{path}: damaged history file (step_history is not whole numbers)")
        for group in ("model", "best_model"):
            if group in f and not (isinstance(f[group], h5py.Group) and all(
                    isinstance(d, h5py.Dataset) and d.dtype.kind == "f" and d.ndim for d in f[group].values())):
                raise HistoryError(f"{path}: damaged history file ({group} is not a group of parameter arrays)")
            for dataset in f.get(group, {}).values():  # read to verify their checksums: damage shows here
                dataset[()]
        try:
            arguments = typed({k: from_attr(v) for k, v in f["arguments"].attrs.items()} if "arguments" in f
                              else {})
        except ConfigError as e:
            raise HistoryError(f"{path}: damaged history file (argument {e})") from None
        steps, frames = int(attrs.get("steps", 0)), int(attrs.get("frames", 0))
    return History(path=path, game=attrs.get("game"), steps=steps, frames=frames,
                   package_version=attrs.get("package_version"), arguments=arguments, attrs=attrs, **arrays)
