"""The files a training run writes under ``--name`` (history, checkpoint, lock), and the checks
made before it starts: what it needs, and which earlier files it would replace. No Lua
counterpart: DQN 3.0 wrote its file over whatever was there, and failed where it met a problem."""
from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import re

import numpy as np
from filelock import FileLock, Timeout

from .checkpoint import read_evaluations, read_header
from .config import FIELDS, ConfigError, available_memory, replay_bytes
from .environment import rom_path
from .eval_log import TENSORBOARD_MISSING, csv_log_problem, earlier_records
from .files import creation_problem, os_reason
from .history import HistoryError, load_history

NAME_MAX = 255  # bytes in a file name on Linux's and macOS's filesystems
PID_MAX = 2**22  # the largest process id on Linux (temporaries are named .<file>.tmp<pid>)


def lock_path(name: str) -> str:
    """The lock file ``.<name>.lock`` that a run under ``--name`` holds (``run_lock``)."""
    folder, base = os.path.split(name)
    return os.path.join(folder, f".{base}.lock")


def numbered_files(config, suffix: str = ".h5") -> list[tuple[int, str]]:
    """(k, path) of the ``<name>_<k><suffix>`` files under ``--name``, in order of k; none
    without save_versions."""
    if not config.save_versions:
        return []
    prefix = config.name + "_"
    found = ((path[len(prefix):-len(suffix)], path) for path in glob.glob(glob.escape(prefix) + "[0-9]*" + suffix))
    return sorted((int(k), path) for k, path in found if k.isdigit())


def output_files(config) -> list[str]:
    """The paths, existing or not, that a run under ``config`` writes and a folder there would fail:
    its lock file, checkpoint and histories (``.params.h5`` too with save_network_params); with
    save_versions, the numbered ones up to the run's last number that exist already."""
    suffixes = (".h5", ".params.h5") if config.save_network_params else (".h5",)
    if config.save_versions:
        last = config.steps // config.save_versions
        histories = [path for suffix in suffixes for k, path in numbered_files(config, suffix) if k <= last]
    else:
        histories = [config.name + suffix for suffix in suffixes]
    return [lock_path(config.name), config.name + ".ckpt", *histories]


def output_folders(config) -> dict[str, str]:
    """The folders the run writes in, each with the option naming it: ``--name``'s, and
    ``--csv-log``'s and ``--tensorboard``'s where given."""
    folders = {os.path.dirname(os.path.abspath(config.name)): f"--name {config.name!r}"}
    if config.csv_log:
        folders.setdefault(os.path.dirname(os.path.abspath(config.csv_log)), f"--csv-log {config.csv_log!r}")
    if config.tensorboard:
        folders.setdefault(os.path.abspath(config.tensorboard), f"--tensorboard {config.tensorboard!r}")
    return folders


def resume_path(name: str) -> str:
    """The checkpoint of ``--resume``: a ``.ckpt`` path, or the ``.ckpt`` of a run's name or ``.h5``
    history (``<name>.ckpt`` for a save_versions history ``<name>_<k>.h5``)."""
    if name.endswith(".ckpt"):
        return name
    base = name.removesuffix(".h5")
    versioned = re.fullmatch(r"(.+)_\d+", base) if name.endswith(".h5") else None
    if versioned and not os.path.exists(base + ".ckpt") and os.path.exists(versioned[1] + ".ckpt"):
        return versioned[1] + ".ckpt"
    return base + ".ckpt"


def check_resources(config) -> None:
    """Refuse, before anything is allocated or written, a game without a ROM, ``--tensorboard``
    without its package, a ``--csv-log`` that is a folder, of other columns or one of the run's own
    files, an output file that is a folder, file names too long, a replay memory the machine cannot
    hold, or an output folder that cannot be written.

    Raises:
        environment.GameError, ConfigError.
    """
    rom_path(config.game, config.game_path)
    if config.tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise ConfigError(TENSORBOARD_MISSING)
    if config.csv_log and (os.path.isdir(config.csv_log) or config.csv_log.endswith(os.sep)):
        raise ConfigError(f"--csv-log {config.csv_log!r} is a folder; give a file name")
    if problem := config.csv_log and csv_log_problem(config.csv_log):
        raise ConfigError(f"--csv-log {config.csv_log!r} exists and {problem}; give another file")
    run_files = [config.name + suffix for suffix in (".h5", ".ckpt", ".params.h5")]
    if config.csv_log and os.path.realpath(config.csv_log) in map(os.path.realpath, run_files):
        raise ConfigError(f"--csv-log {config.csv_log!r} is one of the run's own files; give another file")
    for path in output_files(config):
        if os.path.isdir(path):
            raise ConfigError(f"{path} is a folder; choose another --name")
    base = len(os.fsencode(os.path.basename(config.name)))
    suffixes = len(f"._{config.steps}.params.h5.tmp{PID_MAX}")  # of the longest name written: a temporary's
    if base + suffixes > NAME_MAX:
        raise ConfigError(f"--name {config.name!r}: the files' names would be too long; give a base name of at most "
                          f"{NAME_MAX - suffixes} bytes")
    if config.csv_log and len(os.fsencode(os.path.basename(config.csv_log))) + len(f"..tmp{PID_MAX}") > NAME_MAX:
        raise ConfigError(f"--csv-log {config.csv_log!r}: its temporary's name would be too long; give a shorter "
                          "file name")
    need, free = replay_bytes(config), available_memory()
    if free is not None and need > free:
        raise ConfigError(f"a replay memory of {config.replay_memory} transitions of {config.hist_len}-frame states "
                          f"needs {need / 1e9:.1f} GB, but only {free / 1e9:.1f} GB of memory is available; lower "
                          "--replay-memory")
    for folder, option in output_folders(config).items():
        existing = folder
        while not os.path.isdir(existing):
            if os.path.exists(existing):
                raise ConfigError(f"cannot write output files in {folder!r} (from {option}): {existing!r} is a file")
            existing = os.path.dirname(existing)
        if problem := creation_problem(existing):
            raise ConfigError(f"cannot write output files in {folder!r} (from {option}): {problem}")


@contextlib.contextmanager
def run_lock(name: str):
    """Hold the hidden file ``.<name>.lock`` beside the run's files while the block runs (then
    remove it), so that a second ``dqn-train`` under the same ``--name`` is refused instead of
    replacing this run's files. A killed run leaves the file unlocked. The folder must exist.

    Raises:
        ConfigError: on entering, another process holds the lock, or the file cannot be created.
    """
    lock = FileLock(lock_path(name), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigError(f"another dqn-train is running under --name {name} (it holds {lock.lock_file}); "
                          "wait for it or choose another --name") from None
    except OSError as e:  # a folder of that name, say (check_resources refuses one found before)
        raise ConfigError(f"cannot create the lock file {lock.lock_file} of --name {name}: {os_reason(e)}") from None
    try:
        yield
    finally:
        lock.release()
        with contextlib.suppress(OSError):
            os.remove(lock.lock_file)


def check_earlier_run(config, checkpoint: str | None, overwrite: bool) -> list[str]:
    """Refuse, unless ``overwrite``, to replace what an earlier run left: the run's files (``<name>.h5``,
    ``<name>.ckpt``, numbered histories) for a fresh run or a resume under another name; the
    ``--csv-log`` rows and ``--tensorboard`` scalars for a fresh run; for a resume of ``checkpoint``
    that continues its files, a history another run wrote (``history_mismatch``). Made under the
    run's lock. Returns one-line warnings: histories past the checkpoint, or that ``overwrite`` leaves.

    Raises:
        ConfigError: naming the file and how to go on.
    """
    numbered = [path for _, path in numbered_files(config)]  # <name>_<k>.h5, in order of k
    own = config.name + ".ckpt"
    continues = bool(checkpoint) and os.path.exists(own) and os.path.samefile(own, checkpoint)
    if overwrite and numbered and not continues:
        listed = numbered[0] if len(numbered) == 1 else f"{numbered[0]} ... {numbered[-1]}, {len(numbered)} files"
        return [f"warning: the earlier run's numbered histories ({listed}) stay until this run writes the same "
                "numbers: --overwrite replaces files as they are written"]
    if overwrite:
        return []
    histories = [config.name + ".h5", *numbered]
    if continues:
        warnings = []
        for path in filter(os.path.isfile, histories):
            problem, ahead = history_mismatch(path, checkpoint)
            if problem:
                raise ConfigError(f"{path} is not the history of {checkpoint}: {problem}; replace it with "
                                  "--overwrite, or resume under another --name")
            if ahead:
                warnings.append(f"warning: {path} has gone on to step {ahead}, past the checkpoint's: the resumed "
                                "run makes its later evaluations again")
        return warnings
    existing = next(filter(os.path.isfile, [histories[0], own, *histories[1:]]), None)
    if existing and checkpoint:
        raise ConfigError(f"{existing} exists, from another run than {checkpoint}: replace it with --overwrite, "
                          "or choose another --name")
    if existing:
        resumable = f"continue it with --resume {config.name}, " if os.path.isfile(own) else ""
        raise ConfigError(f"{existing} exists, from an earlier run: {resumable}replace it with --overwrite, "
                          "or choose another --name")
    if not checkpoint and (log := earlier_records(config.csv_log, config.tensorboard)):
        raise ConfigError(f"{log} holds an earlier run's evaluations: replace them with --overwrite, or log elsewhere")
    return []


def history_mismatch(history: str, checkpoint: str) -> tuple[str | None, int | None]:
    """Whether the history file ``history`` is another run's than ``checkpoint``: its game or
    an option that cannot change when resuming differs, or an evaluation both hold does. Returns
    (why it is another run's or None, the history's step where it is past the checkpoint's or None).

    Raises:
        checkpoint.CheckpointError: ``checkpoint`` cannot be read.
    """
    try:
        h = load_history(history)
    except HistoryError as e:
        return f"it cannot be read ({e})", None
    arguments, step = read_header(checkpoint)
    if h.game != arguments.get("game"):
        return f"its game is {h.game}, the checkpoint's {arguments.get('game')}", None
    fixed = [f.name for f in FIELDS if not f.metadata["resume"] and f.name in arguments and f.name in h.arguments]
    if changed := next((name for name in fixed if h.arguments[name] != arguments[name]), None):
        return f"its {changed} is {h.arguments[changed]!r}, the checkpoint's {arguments[changed]!r}", None
    stored = read_evaluations(checkpoint)
    n = min(len(h.step_history), len(stored["step_history"]))
    for key in ("step_history", "reward_history", "v_history"):
        if not np.array_equal(getattr(h, key)[:n], stored[key][:n], equal_nan=True):
            return "their evaluations differ", None
    return None, (h.steps if h.steps > step else None)
