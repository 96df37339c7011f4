"""``dqn-train``: the command line of ``train_agent.lua`` (and the ``run_gpu`` script's defaults).

Every option of ``config.Config`` is a flag in two spellings, ``--eval-freq`` and the
Lua ``-eval_freq``, so the original argument strings work verbatim.
"""
from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import re
import sys
from pathlib import Path

import click
from click.core import ParameterSource
from filelock import FileLock, Timeout
from tqdm import tqdm

from .console import LuaCommand, StopRequest, creation_problem, fail, os_reason, run_command
from .config import (FIELDS, ConfigError, available_memory, build, field_type, layered, lua_name, replay_bytes,
                     resume_config)
from .environment import GameError, rom_path
from .eval_log import TENSORBOARD_MISSING, EvaluationLogs, csv_log_problem, earlier_records
from .history import HistoryError

_CLICK_TYPES = {int: click.INT, float: click.FLOAT, str: click.STRING, bool: click.BOOL}
PRESET_DIRS = (Path("args"), Path(__file__).resolve().parent.parent / "args")
NAME_MAX = 255  # bytes in a file name on Linux's and macOS's filesystems
PID_MAX = 2**22  # the largest process id on Linux (temporaries are named .<file>.tmp<pid>)


def config_options(func):
    """Decorate a click command with one option per ``Config`` field, in both spellings (and a
    ``--no-`` form for flags): the Lua spelling is ``train_agent.lua``'s ``cmd:option``."""
    for f in reversed(FIELDS):
        flags = [f"--{f.name.replace('_', '-')}", f"-{lua_name(f)}", *f.metadata["aliases"]]
        help_text = f"{f.metadata['help']} [default: {f.default}]"
        if f.metadata["flag"]:  # --no-<flag> switches it off, e.g. when resuming
            flags[0] += f"/--no-{f.name.replace('_', '-')}"
            func = click.option(*flags, f.name, is_flag=True, default=None, help=help_text)(func)
        else:
            func = click.option(*flags, f.name, type=_CLICK_TYPES[field_type(f)], default=None,
                                help=help_text, metavar=field_type(f).__name__.upper())(func)
    return func


def explicit_options(ctx: click.Context, values: dict) -> dict:
    """The ``Config`` options that were given on the command line."""
    return {f.name: values[f.name] for f in FIELDS
            if ctx.get_parameter_source(f.name) == ParameterSource.COMMANDLINE}


def find_preset(name: str) -> str:
    """Path of preset ``name``: a file, or ``args/<name>[.toml]`` here or in the project. No Lua
    counterpart: presets stand in for the ``run_gpu`` scripts.

    Raises:
        ConfigError: no such preset.
    """
    if os.path.isfile(name):
        return name
    for folder in PRESET_DIRS:
        for candidate in (folder / name, folder / f"{name}.toml"):
            if candidate.is_file():
                return str(candidate)
    raise ConfigError(f"no preset {name!r} (a TOML file, or a name in args/)")


def output_folders(config) -> dict[str, str]:
    """The folders the run writes in (created if missing), each with the option naming it:
    ``--name``'s, and ``--csv-log``'s and ``--tensorboard``'s where given."""
    folders = {os.path.dirname(os.path.abspath(config.name)): f"--name {config.name!r}"}
    if config.csv_log:
        folders.setdefault(os.path.dirname(os.path.abspath(config.csv_log)), f"--csv-log {config.csv_log!r}")
    if config.tensorboard:
        folders.setdefault(os.path.abspath(config.tensorboard), f"--tensorboard {config.tensorboard!r}")
    return folders


def lock_path(name: str) -> str:
    """The lock file ``.<name>.lock`` that a run under ``--name`` holds (``run_lock``). No Lua
    counterpart."""
    folder, base = os.path.split(name)
    return os.path.join(folder, f".{base}.lock")


def output_files(config) -> list[str]:
    """The paths, existing or not, that a run under ``config`` writes and a folder there would
    fail: its lock file, checkpoint and histories (``.params.h5`` too with
    save_network_params); with save_versions, the numbered ones up to the run's last number
    that exist already. No Lua counterpart."""
    suffixes = (".h5", ".params.h5") if config.save_network_params else (".h5",)
    if config.save_versions:
        last = config.steps // config.save_versions
        histories = [path for suffix in suffixes for k, path in numbered_files(config, suffix) if k <= last]
    else:
        histories = [config.name + suffix for suffix in suffixes]
    return [lock_path(config.name), config.name + ".ckpt", *histories]


def check_resources(config) -> None:
    """Refuse, before anything is allocated or written, a missing ROM, a ``--name`` too long
    for the names of its files, a replay memory the machine cannot hold, an output folder that
    cannot be written, a ``--csv-log`` or an output file that names a folder, a ``--csv-log``
    file of other columns, one of the run's own files or one too long a name for its
    temporary, or ``--tensorboard`` without its package. No Lua counterpart (DQN 3.0 failed
    where it met them).

    Raises:
        GameError, ConfigError.
    """
    rom_path(config.game, config.game_path)
    if config.tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise ConfigError(TENSORBOARD_MISSING)
    if config.csv_log and (os.path.isdir(config.csv_log) or config.csv_log.endswith(os.sep)):
        raise ConfigError(f"--csv-log {config.csv_log!r} is a folder; give a file name")
    problem = config.csv_log and csv_log_problem(config.csv_log)
    if problem:
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
        if creation_problem(existing):
            raise ConfigError(f"cannot write output files in {folder!r} (from {option})")


class Progress:
    """A tqdm bar on a terminal, else a line every ``prog_freq`` steps; ``agent:report()``
    norms at verbose >= 2 (``train_agent.lua``'s progress prints). No Lua counterpart for the
    rate and the time left (ETA).

    Rates are agent steps per second of training time (``Trainer.train_time``: evaluations
    excluded), over the current phase: random play before learning starts, the learning phase
    after. The ETA is the learning phase's: unknown ("?") until learning starts (random play
    runs many times faster), unless the run ends before; then the remaining steps at the
    learning phase's rate, plus the remaining evaluations at the last one's duration (none
    counted before the first has run).
    """

    def __init__(self, trainer):
        self.trainer, c, agent = trainer, trainer.config, trainer.agent
        rewards = trainer.history["reward_history"]  # a resumed run has some
        self.last_reward = f"{rewards[-1]:.2f}" if rewards else None
        self.learning_after = agent.learn_start + agent.replay_restart  # the agent step after which it learns
        self.learning = agent.num_steps > self.learning_after
        self.origin = trainer.step, trainer.train_time  # where the current phase's rate is measured from
        self.eval_time = None  # seconds, the last evaluation's eval_steps steps
        self.bar = _Bar(self.time_left, total=c.steps, initial=trainer.step, unit="step", dynamic_ncols=True,
                        disable=not sys.stderr.isatty() or c.verbose < 1, smoothing=0.05,
                        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, ETA {time_left}, "
                                   "{rate_fmt}{postfix}]")

    def rate(self) -> float | None:
        """Steps per second of training time in the current phase, None before one step of it."""
        step, train_time = self.origin
        elapsed = self.trainer.train_time - train_time
        return (self.trainer.step - step) / elapsed if self.trainer.step > step and elapsed > 0 else None

    def time_left(self) -> str:
        """The ETA as ``tqdm.format_interval`` writes it ("1:02:03"), or "?"."""
        t, c = self.trainer, self.trainer.config
        rate = self.rate()
        if rate is None or not (self.learning or c.steps <= self.learning_after + 1):
            return "?"
        evaluations = max(0, c.steps // c.eval_freq - max(t.step, t.agent.learn_start) // c.eval_freq)
        return tqdm.format_interval((c.steps - t.step) / rate + evaluations * (self.eval_time or 0))

    def write(self, text: str) -> None:
        """Print a line (above the bar on a terminal) at verbose >= 1."""
        if self.trainer.config.verbose >= 1:
            tqdm.write(text) if not self.bar.disable else click.echo(text)

    def update(self, event) -> None:
        """Advance one step (a ``train.Event``): every ``prog_freq`` steps print the progress
        line and, at verbose >= 2, ``agent.report()``; then an evaluation's summary (the order
        of ``train_agent.lua``)."""
        t, c = self.trainer, self.trainer.config
        if not self.learning and t.agent.num_steps > self.learning_after:
            self.learning, self.origin = True, (event.step, t.train_time)
        if event.evaluation is not None:
            self.eval_time = event.evaluation.eval_time
        self.bar.update(1)
        if event.step % c.prog_freq == 0:
            self.bar.set_postfix(frames=event.step * c.actrep, epsilon=f"{t.agent.train_epsilon():.3f}",
                                 reward=self.last_reward, refresh=False)
            if self.bar.disable:
                rate = self.rate()
                self.write(f"Steps: {event.step} (frames: {event.step * c.actrep}), "
                           f"{'?' if rate is None else f'{rate:.1f}'} steps/s, ETA {self.time_left()}, "
                           f"epsilon {t.agent.train_epsilon():.3f}, last eval reward {self.last_reward}")
            if c.verbose >= 2:
                self.write(t.agent.report())
        if event.evaluation is not None:
            self.last_reward = f"{event.evaluation.reward:.2f}"
            self.write(event.evaluation.summary())

    def close(self):
        """Close the bar."""
        self.bar.close()


class _Bar(tqdm):
    """A tqdm bar whose ``bar_format`` may hold ``{time_left}``: the string ``time_left()`` returns."""

    def __init__(self, time_left, **kwargs):
        self.time_left = time_left
        super().__init__(**kwargs)

    @property
    def format_dict(self):
        """tqdm's, with ``time_left``."""
        return {**super().format_dict, "time_left": self.time_left()}


def numbered_files(config, suffix: str = ".h5") -> list[tuple[int, str]]:
    """(k, path) of the ``<name>_<k><suffix>`` files under ``--name``, in order of k; none
    without save_versions. No Lua counterpart."""
    if not config.save_versions:
        return []
    prefix = config.name + "_"
    found = ((path[len(prefix):-len(suffix)], path) for path in glob.glob(glob.escape(prefix) + "[0-9]*" + suffix))
    return sorted((int(k), path) for k, path in found if k.isdigit())


def numbered_histories(config) -> list[str]:
    """The ``<name>_<k>.h5`` files under ``--name``, in order of k; none without save_versions."""
    return [path for _, path in numbered_files(config)]


def earlier_run(config) -> str | None:
    """A file of an earlier run that a fresh run under ``--name`` would replace, or None:
    ``<name>.h5``, ``<name>.ckpt`` or, with save_versions, a ``<name>_<k>.h5``."""
    paths = [config.name + ".h5", config.name + ".ckpt", *numbered_histories(config)]
    return next((p for p in paths if os.path.isfile(p)), None)


@contextlib.contextmanager
def run_lock(name: str):
    """Hold the hidden file ``.<name>.lock`` beside the run's files while the block runs (then
    remove it), so that a second ``dqn-train`` under the same ``--name`` stops with an error
    (exit 2) instead of replacing this run's files. A killed run leaves the file unlocked."""
    lock = FileLock(lock_path(name), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        fail(f"another dqn-train is running under --name {name} (it holds {lock.lock_file}); "
             "wait for it or choose another --name")
    except OSError as e:  # a folder of that name, say (check_resources refuses one found before)
        fail(f"cannot create the lock file {lock.lock_file} of --name {name}: {os_reason(e)}")
    try:
        yield
    finally:
        lock.release()
        with contextlib.suppress(OSError):
            os.remove(lock.lock_file)


def resume_path(name: str) -> str:
    """The checkpoint of ``--resume``: a ``.ckpt`` path, or the run's name or ``.h5`` history,
    from which the run's ``.ckpt`` is named (``<name>.ckpt`` for a save_versions history
    ``<name>_<k>.h5``)."""
    if name.endswith(".ckpt"):
        return name
    base = name.removesuffix(".h5")
    versioned = re.fullmatch(r"(.+)_\d+", base) if name.endswith(".h5") else None
    if versioned and not os.path.exists(base + ".ckpt") and os.path.exists(versioned[1] + ".ckpt"):
        return versioned[1] + ".ckpt"
    return base + ".ckpt"


@click.command(cls=LuaCommand, context_settings=dict(help_option_names=["-h", "--help"],
                                                  max_content_width=110))
@click.option("--args", "-args", "preset", metavar="PRESET", help="TOML preset (a file, or a name in args/)")
@click.option("--agent-params", "-agent_params", "agent_params", metavar="LUA_TABLE",
              help='NeuralQLearner parameters as a Lua table body, e.g. lr=0.00025,ep=1,learn_start=50000')
@click.option("--pool-frms", "-pool_frms", "pool_frms", metavar="LUA_TABLE",
              help='frame pooling as a Lua table body, e.g. type="max",size=2')
@click.option("--resume", metavar="CKPT",
              help="continue the run of this checkpoint (a .ckpt, or the run's name or .h5 history)")
@click.option("--overwrite", is_flag=True, help="replace the files an earlier run left under <name> (.h5, .ckpt) "
              "when starting afresh, or resuming under another --name; a fresh run also replaces "
              "the --csv-log rows and --tensorboard scalars it finds")
@config_options
@click.pass_context
def train(ctx, preset, agent_params, pool_frms, resume, overwrite, **values):
    """Train DQN 3.0 (Mnih et al., Nature 2015) on an Atari game; write <name>.h5.

    Defaults are the paper's run_gpu configuration. Precedence: defaults < --args
    preset < --agent-params < individual options. Steps are agent steps; frames =
    steps x actrep. SIGINT/SIGTERM stop after the current step, writing the history
    and a checkpoint <name>.ckpt for --resume.
    """
    from .checkpoint import CheckpointError, read_header

    # From here a signal is recorded, not raised: a KeyboardInterrupt raised inside h5py while
    # the checkpoint (or --network) is read was swallowed there, and the run went on, or ended
    # in a traceback. The run stops once it is set up, before its first step, writing nothing.
    stop = StopRequest(lambda: "stopping once the run is set up, before it writes anything; a second signal "
                       "exits at once")
    try:
        changes = layered(explicit_options(ctx, values), find_preset(preset) if preset else None,
                          agent_params, pool_frms)
        if resume == "":
            raise ConfigError("--resume: give the run's checkpoint, name or .h5 history")
        if resume:
            checkpoint = resume_path(resume)
            arguments, step = read_header(checkpoint)
            # The run goes on beside its checkpoint, wherever it was moved or resumed from.
            config = resume_config(arguments, {"name": checkpoint.removesuffix(".ckpt"), **changes})
            if config.steps <= step:
                raise ConfigError(f"{checkpoint} is at step {step} and --steps is {config.steps}: nothing to "
                                  f"train; give a larger --steps to continue")
        else:
            config = build(changes)
        own = config.name + ".ckpt"  # a resume under the checkpoint's own name continues its files
        continuing = resume and os.path.exists(own) and os.path.samefile(own, checkpoint)
        if not overwrite and not continuing:
            existing = earlier_run(config)
            if existing and resume:
                raise ConfigError(f"{existing} exists, from another run than {checkpoint}: replace it with "
                                  "--overwrite, or choose another --name")
            if existing:
                resumable = f"continue it with --resume {config.name}, " if os.path.isfile(config.name + ".ckpt") else ""
                raise ConfigError(f"{existing} exists, from an earlier run: {resumable}replace it with --overwrite, "
                                  "or choose another --name")
        check_resources(config)
        if not overwrite and not resume and (log := earlier_records(config.csv_log, config.tensorboard)):
            raise ConfigError(f"{log} holds an earlier run's evaluations: replace them with --overwrite, "
                              "or log elsewhere")
    except (ConfigError, GameError, CheckpointError) as e:
        fail(str(e))
    for folder, option in output_folders(config).items():
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            fail(f"cannot create the output folder for {option}: {e.strerror}")
    from . import train as training  # torch, imported once the options are known good: errors come at once

    with run_lock(config.name):
        gpu = training.resolve_device(config.gpu, lambda m: click.echo(m, err=True))
        if warning := training.precision_warning(config.precision, gpu):
            click.echo(warning, err=True)
        if config.overlap_updates and gpu >= 0:
            fail("--overlap-updates is a CPU mode: add --gpu -1")
        if config.best and not config.network:  # ignored, as the Lua's -best is without -network
            click.echo("warning: --best has no effect without --network: the run starts from random weights",
                       err=True)
        if overwrite and not continuing and (numbered := numbered_histories(config)):
            listed = numbered[0] if len(numbered) == 1 else f"{numbered[0]} ... {numbered[-1]}, {len(numbered)} files"
            click.echo(f"warning: the earlier run's numbered histories ({listed}) stay until this run writes the "
                       "same numbers: --overwrite replaces files as they are written", err=True)
        run_training(config, gpu, checkpoint if resume else None, stop)


def run_training(config, gpu: int, checkpoint: str | None, stop: StopRequest) -> None:
    """Train under ``config`` on ``gpu`` (-1: the CPU), from ``checkpoint`` when given, saving
    the history and checkpoints on schedule; exits (``fail``, or 128 + signal) where the run stops early.
    The resolved arguments are listed (verbose >= 1) once the ``Trainer``, with its
    ``--network``, is built and the checkpoint restored. ``stop``: the signal handler, already
    installed; a signal that came before the first step stops the run with nothing written.
    The loop of ``train_agent.lua``."""
    from . import train as training
    from .checkpoint import CheckpointError, restore_checkpoint, save_checkpoint

    try:
        # Built and restored first, so that a bad --network or checkpoint fails before the listing.
        trainer = training.Trainer(config, gpu, pretrained=not checkpoint)
        replay = checkpoint and restore_checkpoint(checkpoint, trainer)
        if config.verbose >= 1:
            click.echo("Arguments:")
            for key, value in config.as_dict().items():
                click.echo(f"  {key} = {value!r}")
            click.echo(f"Device: {'cuda:%d' % gpu if gpu >= 0 else 'cpu'}, torch threads: {trainer.threads}")
        if checkpoint:
            click.echo(f"Resumed {checkpoint} at step {trainer.step}; replay memory "
                       + ("restored" if replay else f"empty: learning resumes after {config.learn_start} steps"))
    except (GameError, HistoryError, CheckpointError) as e:
        fail(str(e))
    stop_before_training(stop, checkpoint)  # before the logs, which drop rows a resumed run will write again
    # An evaluation is one step of the loop: minutes at the paper's eval_steps.
    stop.delay = lambda: ("stopping when the evaluation in progress ends; a second signal exits at once, "
                          "losing the steps since the last checkpoint" if trainer.evaluating else None)
    for warning in trainer.schedule_warnings():
        click.echo(warning, err=True)
    checkpoint_path = config.name + ".ckpt"
    checkpoint_freq = config.checkpoint_freq or config.save_freq

    def write_checkpoint():
        save_checkpoint(checkpoint_path, trainer, config.checkpoint_replay, config.checkpoint_compress)
        return checkpoint_path

    try:
        logs = EvaluationLogs(config.csv_log, config.tensorboard, config.as_dict(), start_step=trainer.step)
    except OSError as e:
        fail(f"cannot prepare the evaluation logs: {os_reason(e)}")
    progress = Progress(trainer)
    try:
        for event in trainer.run():
            progress.update(event)
            if event.evaluation is not None:
                try:
                    logs.write(trainer, event.evaluation)
                except OSError as e:  # a log is a convenience: never worth the run
                    tqdm.write(f"warning: evaluation at step {event.step} not logged ({os_reason(e)}); "
                               "the history file keeps its figures", file=sys.stderr)
            last = event.step == config.steps
            if event.step % config.save_freq == 0 or last:
                progress.write(f"Saved: {trainer.save()}")
            if event.step % checkpoint_freq == 0 or last:
                progress.write(f"Checkpoint: {write_checkpoint()}")
            if stop.signum is not None:
                progress.close()
                click.echo(f"Stopped by {stop.name} at step {trainer.step}: history {trainer.save()}, checkpoint "
                           f"{write_checkpoint()}. Resume with: dqn-train --resume {checkpoint_path}", err=True)
                sys.exit(128 + stop.signum)
    except OSError as e:
        progress.close()
        fail(f"cannot write output for --name {config.name!r}: {os_reason(e)}; the files written before are intact",
             code=1)
    progress.close()
    logs.close()


def stop_before_training(stop: StopRequest, checkpoint: str | None) -> None:
    """Exit with 128 + signal where ``stop`` has recorded one, before the run's first step: no
    file of the run has been written (a resumed run's files are as they were). No Lua counterpart."""
    if stop.signum is not None:
        kept = f"; {checkpoint} is as it was" if checkpoint else ""
        click.echo(f"Stopped by {stop.name} before training: nothing written{kept}", err=True)
        sys.exit(128 + stop.signum)


def main(args=None) -> None:
    """Console entry point of ``dqn-train``."""
    run_command(train, args)
