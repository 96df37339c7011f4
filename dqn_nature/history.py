"""The run history file ``<name>.h5`` (the port of the ``.t7`` that ``train_agent.lua`` saves).

Layout: root attributes ``format``, ``format_version``, ``game``, ``steps``, ``frames``,
``package_version``; group ``history`` (one entry per evaluation, ``time_history`` one
more); groups ``model`` and ``best_model`` (float32 parameters named as in the
network's ``state_dict``; a ``dqn-slim`` copy may hold one or none, in float16, and has the
root attribute ``slimmed_from``); group ``arguments`` (every resolved option as an attribute).
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
from typing import TYPE_CHECKING

import h5py
import numpy as np

from .config import FIELDS, ConfigError, typed
from .files import atomic_path

if TYPE_CHECKING:  # imported where used: every command imports this module, and --help needs no torch
    import torch

FORMAT = "dqn_nature.history"
FORMAT_VERSION = 1
PARAMS_FORMAT = "dqn_nature.params"
# h5py.File options for writing. Files carry HDF5 checksums, of the metadata (the 1.10 file format)
# and of every dataset (Fletcher-32), so a damaged file fails to load instead of giving wrong numbers.
# No chunk cache: a full disk then fails the write itself rather than h5py's clean-up.
WRITE_OPTIONS = dict(libver="v110", rdcc_nbytes=0)
# Evaluation histories and their dtypes; time_history has one more entry (it starts at 0).
HISTORY_FIELDS = {
    "reward_history": np.float64, "reward_counts": np.int64, "episode_counts": np.int64,
    "v_history": np.float64, "td_history": np.float64, "qmax_history": np.float64,
    "step_history": np.int64, "time_history": np.float64,
}
LUA_HISTORIES = tuple(k for k in HISTORY_FIELDS if k != "step_history")  # those train_agent.lua saves
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


class HistoryError(ValueError):
    """A file that cannot be read as a history; the message names the file and the problem."""


def write_attrs(obj, values: dict) -> None:
    """Set attributes of ``obj`` (an ``h5py`` file, group or dataset) from ``values``: None is
    stored as an empty string, and strings as fixed-length UTF-8 rather than h5py's default
    variable-length type. Variable-length strings live in the file's global heap, where a few
    damaged bytes can make HDF5 (2.0.0) loop forever while reading; fixed-length ones live in
    the object's header, under the checks that end in a one-line error. ``from_attr`` reads
    both kinds back. No Lua counterpart (``torch.save`` wrote Lua tables).

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


def save_history(path: str, *, game: str, steps: int, frames: int, history: dict, model: dict,
                 best_model: dict | None, arguments: dict, package_version: str, attrs: dict | None = None) -> None:
    """Write a history file atomically (``torch.save`` of the slim agent in ``train_agent.lua``).

    Args:
        path: destination ``.h5``; written under a temporary name, then renamed.
        game: ROM id. steps, frames: training steps done and frames (steps x actrep).
        history: every ``HISTORY_FIELDS`` key to a sequence of numbers.
        model, best_model: ``state_dict`` of the network and of the best network (or None).
        arguments: the resolved options (None values are stored as empty strings).
        package_version: version of dqn_nature that wrote it.
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


@dataclasses.dataclass
class History:
    """A loaded history. Arrays have one entry per evaluation; ``time_history`` one more.

    Attributes: ``path``, ``game``, ``steps`` (agent steps trained), ``frames`` (emulator
    frames, steps x actrep), ``package_version``, the ``HISTORY_FIELDS`` arrays (1-D integers or
    floats as the file stores them, ``HISTORY_FIELDS``' dtypes where ``save_history`` wrote it;
    ``step_history`` in agent steps, ``time_history`` in seconds of training), ``arguments``
    (dict), ``attrs`` (all root attributes).
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
        with read_errors_as(HistoryError, f"{self.path}: damaged history file"), _open(self.path) as f:
            if which not in f:
                raise HistoryError(f"{self.path}: no {which} stored ({_missing_network_hint(f, which)})")
            return {k: torch.from_numpy(v[()]).float() for k, v in f[which].items()}

    def load_network(self, which: str = "model") -> torch.nn.Module:
        """The ``convnet_atari3`` network with the stored weights of ``which``.

        Raises:
            HistoryError: missing network, or weights that do not fit the architecture.
            ValueError: ``which`` is neither ``"model"`` nor ``"best_model"``.
        """
        from .network import convnet_atari3

        state = self.state_dict(which)
        try:
            net = convnet_atari3(state["fc2.weight"].shape[0], state["conv1.weight"].shape[1])
            net.load_state_dict(state)
        except (KeyError, RuntimeError) as e:
            raise HistoryError(f"{self.path}: {which} is not a convnet_atari3 network ({e})") from None
        return net


def _missing_network_hint(f: h5py.File, which: str) -> str:
    """Why the history ``f`` holds no ``which`` network, and what to play instead."""
    if which == "model" and "best_model" in f:
        return "a slim copy keeps best_model: play it with --best"
    source = from_attr(f.attrs.get("slimmed_from"))
    if source is None:
        return "best_model exists after an evaluation"
    if "model" in f:
        return f"dqn-slim left it out of this copy of {source}: play the model it keeps without --best"
    return f"dqn-slim left the networks out of this copy of {source}"


def open_checked(path: str, fmt: str, kind: str, error: type[Exception]) -> h5py.File:
    """``path`` open for reading (an ``h5py.File`` for the caller to close), an HDF5 file whose
    ``format`` attribute is ``fmt`` (a dqn_nature ``kind`` file: "history", "checkpoint"). No
    Lua counterpart (``torch.load``).

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
        found = from_attr(f.attrs.get("format"))
    except READ_ERRORS as e:
        f.close()
        raise error(f"{path}: damaged {kind} file ({e})") from None
    if found != fmt:
        f.close()
        raise error(f"{path}: not a dqn_nature {kind} file (format attribute {found!r})")
    return f


def _open(path: str) -> h5py.File:
    return open_checked(path, FORMAT, "history", HistoryError)


def load_history(path: str) -> History:
    """Read a history written by ``save_history`` (the counterpart of ``torch.load`` of a DQN
    3.0 ``.t7`` snapshot's histories; ``convert`` reads those).

    Raises:
        HistoryError: missing, unreadable, damaged, or not a dqn_nature history file.
    """
    with read_errors_as(HistoryError, f"{path}: damaged history file"), _open(path) as f:
        attrs = {k: from_attr(v) for k, v in f.attrs.items()}
        if attrs.get("format_version") != FORMAT_VERSION:
            raise HistoryError(f"{path}: unsupported history format_version {attrs.get('format_version')!r}")
        missing = [k for k in HISTORY_FIELDS if k not in f.get("history", {})]
        if missing:
            raise HistoryError(f"{path}: history is missing {', '.join(missing)}")
        arrays = {k: f["history"][k][()] for k in HISTORY_FIELDS}
        for key, values in arrays.items():
            if values.ndim != 1 or values.dtype.kind not in "iuf":
                raise HistoryError(f"{path}: damaged history file ({key} is not a list of numbers)")
        n = len(arrays["step_history"])  # evaluations; time_history has one entry more
        uneven = [k for k, v in arrays.items() if len(v) != n + (k == "time_history")]
        if uneven:
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


def slim_history(source: str, target: str, networks=("best_model",), float16: bool = True) -> str:
    """Copy the history ``source`` to ``target`` with fewer or smaller networks, for sharing
    or committing (a full file holds two float32 networks, 13.8 MB for Pong). No DQN 3.0
    counterpart.

    Histories, arguments (where ``source`` has them) and root attributes are copied with their
    values unchanged, text as ``write_attrs`` writes it (an older file's variable-length strings
    become fixed-length); the root attribute ``slimmed_from`` names ``source``. Text values of
    arguments and root attributes that are absolute paths (``csv_log``, ``name``,
    ``slimmed_from``...) keep only their base name: a shared file names no folder of the
    machine it came from. ``target`` may be ``source`` (replaced atomically).

    Args:
        networks: which of ``"model"`` and ``"best_model"`` to keep (each must be in ``source``).
        float16: store the kept networks in float16 (they load back as float32; Q-values
            then differ from the float32 ones by about 2e-4 relative on a trained Pong network);
            False keeps them as stored (float16 in a slim copy).

    Returns:
        A one-line summary with both sizes in MB, and the kept networks' type where it is not float32.

    Raises:
        HistoryError: ``source`` is not a readable history (damaged included), or lacks one of ``networks``.
        OSError: ``target`` cannot be written.
    """
    load_history(source)  # validates format and checksums
    size = os.path.getsize(source)
    with _open(source) as src:
        # What is read before the writing starts, so that an OSError from then on is the target's.
        with read_errors_as(HistoryError, f"{source}: damaged history file"):
            missing = [name for name in networks if name not in src]
            if missing:
                raise HistoryError(f"{source} holds no {' or '.join(missing)} network")
            attrs = {k: from_attr(v) for k, v in src.attrs.items()}
            arguments = {k: from_attr(v) for k, v in src["arguments"].attrs.items()} if "arguments" in src else None
            kept = {name: {key: dataset[()] for key, dataset in src[name].items()} for name in networks}
        with h5_for_writing(target) as dst:
            write_attrs(dst, _without_local_paths({**attrs, "slimmed_from": source}))
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


LABEL_ARGUMENTS = 3  # differing arguments named in a run set's label

# Arguments that do not change what is learned (the seed, the ROM's folder, and the options a
# resumed run may change: output, logging, resources); runs differing only in these are seeds of
# one configuration.
RUN_ONLY_ARGUMENTS = frozenset({"seed", "game_path"} | {f.name for f in FIELDS if f.metadata["resume"]})


@dataclasses.dataclass
class RunSet:
    """Runs of one game and configuration (differing only in ``RUN_ONLY_ARGUMENTS``, e.g. seeds).

    Attributes: ``game``; ``arguments`` (the shared configuration, without ``RUN_ONLY_ARGUMENTS``);
    ``runs`` (list of ``History``, in the order given); ``label`` (a short name for legends and tables).
    """

    game: str
    arguments: dict
    runs: list
    label: str = ""

    def notes(self) -> list[str]:
        """One-line notes (none, one or two) on what reports and plots of the set should say:
        evaluations that finished no episode (their recorded 0 is not a score, and is left out),
        and runs that share a seed (each still counts as a seed; on a CPU they are one run twice)."""
        notes = []
        unscored = sum(int((r.episode_counts == 0).sum()) for r in self.runs)
        if unscored:
            total = sum(len(r.episode_counts) for r in self.runs)
            notes.append(f"{self.label}: {unscored} of {total} evaluations finished no episode; their recorded 0 "
                         "is not a score and is left out (a longer --eval-steps finishes episodes)")
        seeds = [r.arguments.get("seed") for r in self.runs]
        shared = sorted({s for s in seeds if s is not None and seeds.count(s) > 1})
        if shared:
            notes.append(f"{self.label}: several runs have seed {', '.join(map(str, shared))}; each counts as a "
                         "seed (on a CPU they repeat one run)")
        return notes


def history_paths(inputs) -> list:
    """Expand ``inputs`` (files and folders) to history paths: a folder gives every ``*.h5``
    below it, sorted, except ``*.params.h5``. A file met twice is kept once (the first time).

    Raises:
        HistoryError: a folder without any history file.
    """
    paths = []
    for item in inputs:
        if os.path.isdir(item):
            found = sorted(os.path.join(root, name) for root, _, names in os.walk(item) for name in names
                           if name.endswith(".h5") and not name.endswith(".params.h5"))
            if not found:
                raise HistoryError(f"{item}: no .h5 history file in this folder")
            paths += found
        else:
            paths.append(item)
    unique = {}
    for path in paths:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())


def _name_label(runs) -> str:
    names = [os.path.splitext(os.path.basename(r.path))[0] for r in runs]
    if len(names) == 1:
        return names[0]
    return os.path.commonprefix(names).rstrip("_-.0123456789") or names[0]


def _latest_versions(runs: list) -> list:
    """``runs`` (``History``s) with the ``--save-versions`` snapshots of each run (files in one
    folder with its stored name and seed) reduced to the one of most steps, in its first's place."""
    kept = {}
    for h in runs:
        a = h.arguments
        key = (os.path.dirname(os.path.realpath(h.path)), a.get("name"), a.get("seed")) if a.get("save_versions") \
            else id(h)
        if key not in kept or h.steps > kept[key].steps:
            kept[key] = h
    return list(kept.values())


def load_runs(paths, skip=None) -> list:
    """Load histories (files, or folders searched by ``history_paths``) grouped into ``RunSet``s
    by game and configuration, in order of first appearance. No Lua counterpart.

    A run's ``--save-versions`` snapshots count once, by the one of most steps. Labels are the
    file names (their common prefix for several seeds); when a game has several
    configurations, the arguments in which they differ are added, e.g. ``pong_fast [update_freq=1]``
    (the first ``LABEL_ARGUMENTS`` in alphabetical order, then how many more).

    Args:
        paths: history files and folders.
        skip: if given, a file found in a folder that is not a readable history is left out
            and ``skip`` called with the one-line reason; a file named in ``paths`` still raises.

    Raises:
        HistoryError: a path that is not a readable history, or no readable history at all.
    """
    paths = list(paths)
    named = {os.path.realpath(path) for path in paths if not os.path.isdir(path)}
    sets = {}
    for path in history_paths(paths):
        try:
            h = load_history(path)
        except HistoryError as e:
            if skip is None or os.path.realpath(path) in named:
                raise
            skip(str(e))
            continue
        config = {k: v for k, v in sorted(h.arguments.items()) if k not in RUN_ONLY_ARGUMENTS}
        key = (h.game, repr(config))
        sets.setdefault(key, RunSet(h.game, config, [])).runs.append(h)
    if not sets:
        raise HistoryError(f"no readable history in {', '.join(map(str, paths))}")
    result = list(sets.values())
    for s in result:
        s.runs = _latest_versions(s.runs)
        same_game = [o.arguments for o in result if o.game == s.game]
        differing = sorted({k for a in same_game for k in a if any(b.get(k) != a[k] for b in same_game)})
        s.label = _name_label(s.runs)
        if differing:
            shown = [f"{k}={s.arguments.get(k)}" for k in differing[:LABEL_ARGUMENTS]]
            if len(differing) > LABEL_ARGUMENTS:
                shown.append(f"+{len(differing) - LABEL_ARGUMENTS} more")
            s.label += " [" + ", ".join(shown) + "]"
    return result
