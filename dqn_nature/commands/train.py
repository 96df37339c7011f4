"""``dqn-train``: the command line of ``train_agent.lua`` (and the ``run_gpu`` script's defaults).

Every option of ``config.Config`` is a flag in two spellings, ``--eval-freq`` and the
Lua ``-eval_freq``, so the original argument strings work verbatim.
"""
from __future__ import annotations

import contextlib
import os
import sys

import click
from click.core import ParameterSource
from tqdm import tqdm

from ..checkpoint import CheckpointError, read_header, restore_checkpoint, save_checkpoint
from ..config import (FIELDS, REMOVED_OPTIONS, ConfigError, build, field_type, find_preset, layered, lua_name,
                      resume_config)
from ..console import CONTEXT, LuaCommand, StopRequest, fail, run_command
from ..environment import GameError
from ..eval_log import EvaluationLogs
from ..files import os_reason
from ..history import HistoryError
from ..progress import Progress
from ..run_files import check_earlier_run, check_resources, output_folders, resume_path, run_lock


def config_options(func):
    """Decorate a click command with one option per ``Config`` field, in both spellings (and a
    ``--no-`` form for flags): the Lua spelling is ``train_agent.lua``'s ``cmd:option``. A
    field without a default shows none (``--name``'s help names the one computed)."""
    for f in reversed(FIELDS):
        flags = [f"--{f.name.replace('_', '-')}", f"-{lua_name(f)}", *f.metadata["aliases"]]
        help_text = f.metadata["help"] + (f" [default: {f.default}]" if f.default is not None else "")
        if f.metadata["flag"]:  # --no-<flag> switches it off, e.g. when resuming
            flags[0] += f"/--no-{f.name.replace('_', '-')}"
            func = click.option(*flags, f.name, is_flag=True, default=None, help=help_text)(func)
        else:
            func = click.option(*flags, f.name, type=field_type(f), default=None,
                                help=help_text, metavar=field_type(f).__name__.upper())(func)
    return func


def explicit_options(ctx: click.Context, values: dict) -> dict:
    """The ``Config`` options that were given on the command line."""
    return {f.name: values[f.name] for f in FIELDS
            if ctx.get_parameter_source(f.name) == ParameterSource.COMMANDLINE}


@click.command(cls=LuaCommand, context_settings=CONTEXT)
@click.option("--args", "-args", "preset", metavar="PRESET",
              help="TOML preset: a file, or a name in ./args/ or among the package's (run_gpu, run_cpu, pong_fast)")
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
    steps x actrep. SIGINT, SIGTERM and SIGHUP stop after the current step, writing the
    history and a checkpoint <name>.ckpt for --resume.
    """
    # From here a signal is recorded, not raised: h5py swallowed a KeyboardInterrupt raised while it read
    # the checkpoint (or --network). The run stops once it is set up, before its first step, writing nothing.
    stop = StopRequest(lambda: "stopping once the run is set up, before it writes anything; a second signal "
                       "exits at once")
    checkpoint = None
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
            for key, line in REMOVED_OPTIONS.items():
                if arguments.get(key):
                    click.echo(line, err=True)
        else:
            config = build(changes)
        check_resources(config)
    except (ConfigError, GameError, CheckpointError) as e:
        fail(str(e))
    for folder, option in output_folders(config).items():
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            fail(f"cannot create the output folder for {option}: {os_reason(e)}")
    with contextlib.ExitStack() as held:
        # The lock first, then the check for an earlier run's files: a run under the same
        # --name that ends in between cannot have its files replaced.
        try:
            held.enter_context(run_lock(config.name))
            warnings = check_earlier_run(config, checkpoint, overwrite)
        except (ConfigError, CheckpointError) as e:
            fail(str(e))
        from .. import train as training  # torch, imported once the options are known good: errors come at once

        gpu = training.resolve_device(config.gpu, warnings.append)
        warnings.append(training.precision_warning(config.precision, gpu))
        if config.best and not config.network:  # ignored, as the Lua's -best is without -network
            warnings.append("warning: --best has no effect without --network: the run starts from random weights")
        for warning in filter(None, warnings):
            click.echo(warning, err=True)
        run_training(config, gpu, checkpoint, stop)


def run_training(config, gpu: int, checkpoint: str | None, stop: StopRequest) -> None:
    """Train under ``config`` on ``gpu`` (-1: the CPU), from ``checkpoint`` when given, saving on
    schedule (the loop of ``train_agent.lua``); exits (``fail``, or 128 + signal) where the run stops
    early, with nothing written on a signal to ``stop`` (installed) before the first step."""
    from .. import train as training

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
    if stop.signum is not None:  # before the logs, which drop rows a resumed run will write again
        kept = f"; {checkpoint} is as it was" if checkpoint else ""
        click.echo(f"Stopped by {stop.name} before training: nothing written{kept}", err=True)
        sys.exit(128 + stop.signum)
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


def main(args=None) -> None:
    """Console entry point of ``dqn-train``."""
    run_command(train, args)
