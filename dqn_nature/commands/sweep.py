"""``dqn-sweep``: one ``dqn-train`` run per (game, seed) as Ray tasks, on this machine or a cluster
(the library's part is ``dqn_nature/sweep.py``)."""
from __future__ import annotations

import importlib.util
import os
import signal
import sys

import click

from .. import sweep
from ..console import FiniteFloatRange, fail, run_command
from ..files import creation_problem, os_reason


class SweepCommand(click.Command):
    """The sweep's click command: a whole ``-h`` argument is ``--help``, as in the other
    commands. A declared ``-h`` would also take the dqn-train Lua flags that the sweep passes
    through and that start with h (``-hist_len`` as ``-h`` and ``ist_len``). No Lua counterpart."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """click's ``parse_args`` with each whole ``-h`` read as ``--help``."""
        return super().parse_args(ctx, ["--help" if arg == "-h" else arg for arg in args])


@click.command(cls=SweepCommand, context_settings=dict(ignore_unknown_options=True, allow_extra_args=True,
                                                       help_option_names=["--help"], max_content_width=110))
@click.option("--games", required=True, metavar="G1,G2,...", help="ale-py ROM ids, comma-separated")
@click.option("--seeds", default="1", show_default=True, metavar="SEEDS", help="e.g. 1-5, 1,3,7 or 1-3,10")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="sweep folder: DIR/<game>/seed<k>/ per run, DIR/sweep.json")
@click.option("--args", "-args", "preset", metavar="PRESET", help="dqn-train preset for every run")
@click.option("--name", "-name", metavar="NAME", help="file base name in each run folder [DQN3_0_1_<game>_FULL_Y]")
@click.option("--address", metavar="ADDRESS", help="Ray cluster: auto, host:port or ray://host:10001 "
              "[default: a Ray instance started here]")
@click.option("--cpus-per-run", type=FiniteFloatRange(min=0, min_open=True), default=1, show_default=True,
              help="CPUs Ray reserves per run (also dqn-train --threads unless given)")
@click.option("--gpus-per-run", type=FiniteFloatRange(min=0), default=0, show_default=True,
              help="GPUs Ray reserves per run (fractions share one); 0 also means dqn-train --gpu -1 unless given")
@click.option("--max-concurrent", type=click.IntRange(min=0), default=0, show_default=True,
              help="runs at a time at most (0: as many as the resources allow)")
@click.pass_context
def sweep_command(ctx, games, seeds, out, preset, name, address, cpus_per_run, gpus_per_run, max_concurrent):
    """Train every GAME x SEED with dqn-train, as Ray tasks; other options go to dqn-train.

    Example: dqn-sweep --games pong,breakout --seeds 1-5 --args run_gpu --gpus-per-run 1 --out sweeps/paper

    Running the same command again skips finished runs and restarts the others (from their
    checkpoint). Ctrl-C or SIGTERM cancels the runs, which leave their last history and
    checkpoint. Exit status: 0 if every run finished, 1 if one failed or sweep.json could not be
    written, 2 for bad options, an unknown game or no reachable Ray, 130 after Ctrl-C, 143 after
    SIGTERM.
    """
    from ..config import ConfigError, default_name
    from ..environment import GameError, rom_path

    game_list = list(dict.fromkeys(g.strip() for g in games.split(",") if g.strip()))
    out = os.path.abspath(out)
    record_path = os.path.join(out, "sweep.json")
    try:
        if not game_list:
            raise click.BadParameter("no game given", param_hint="--games")
        seed_list = sweep.parse_seeds(seeds)
        # A folder in it could lead every run to one file (../x, /abs/x): the runs would share
        # one history, and a run that never trained would count as finished.
        if name and (os.path.basename(name) != name or (os.altsep and os.altsep in name) or name in (".", "..")
                     or name.endswith((".h5", ".ckpt"))):
            raise click.BadParameter(f"{name!r}: give a file base name, without a folder or suffix (each run's "
                                     "files are OUT/<game>/seed<k>/NAME.h5 and .ckpt)", param_hint="--name")
        forwarded, config = sweep.train_arguments(ctx.args, game_list[0], preset, cpus_per_run, gpus_per_run)
        # On a cluster, only that ale-py knows it: workers may hold --game-path ROMs this machine lacks.
        for game in game_list:
            rom_path(game, None if address else config.game_path)
        options = sweep.fixed_options(config)
        sweep.check_same_experiment(record_path, options)
    except (ConfigError, GameError) as e:  # click's errors are run_command's to report
        fail(str(e))
    if importlib.util.find_spec("ray") is None:
        fail("Ray is not installed: pip install 'dqn-nature[ray]'")
    arguments = dict(games=game_list, seeds=seed_list, out=out, name=name, train_args=forwarded,
                     steps=config.steps, options=options, address=address, cpus_per_run=cpus_per_run,
                     gpus_per_run=gpus_per_run, max_concurrent=max_concurrent)
    done_before = sweep.previous_finished(record_path, arguments)
    runs = []
    for game in game_list:
        for seed in seed_list:
            folder = os.path.join(out, game, f"seed{seed}")
            base = os.path.join(folder, name or default_name(game))
            run = sweep.Run(game, seed, folder, base + ".h5", base + ".ckpt", os.path.join(folder, "train.log"),
                      *sweep.run_logs(config, game, seed))
            run.read_files()
            if run.steps >= config.steps or (game, seed) in done_before:
                run.state = "skipped"
            runs.append(run)
    todo = [r for r in runs if r.state == "pending"]
    table, started, ray = sweep.Table(runs, config.steps), sweep.now(), None
    stop = []  # the signal that interrupted the sweep
    try:  # before Ray, whose start is slow and talkative
        os.makedirs(out, exist_ok=True)
        problem = creation_problem(out)
    except OSError as e:
        problem = os_reason(e)
    if problem:
        fail(f"cannot write in --out {out}: {problem}")
    if todo:
        try:
            ray = sweep.start_ray(address)
        except Exception as e:  # ConnectionError, RuntimeError, ValueError: each version differs
            fail(f"cannot start or reach Ray{' at ' + address if address else ''}: {e}")
        have = ray.cluster_resources()
        for option, need, kind in (("--cpus-per-run", cpus_per_run, "CPU"), ("--gpus-per-run", gpus_per_run, "GPU")):
            if need > have.get(kind, 0):  # Ray would wait for them for ever
                ray.shutdown()
                fail(f"{option} {need:g}: the Ray cluster has {have.get(kind, 0):g} {kind}s")
    try:
        sweep.write_record(record_path, arguments, runs, started, None)
    except OSError as e:
        fail(f"cannot write {record_path}: {os_reason(e)}", code=1)

    def save(finished: str | None = None) -> bool:
        """Write sweep.json again; where that fails (a full disk), warn and return False: the
        runs are not stopped for their record."""
        try:
            sweep.write_record(record_path, arguments, runs, started, finished)
        except OSError as e:
            click.echo(f"dqn-sweep: warning: cannot write {record_path}: {os_reason(e)} (the runs are unaffected; "
                       "the same command run again rewrites it)", err=True)
            return False
        return True

    if ray:
        def interrupt(signum, frame):
            stop.append(signum)
            raise KeyboardInterrupt

        # After ray.init, whose handler only logs a SIGTERM; a SIGINT ignored by a background
        # shell is taken too, as dqn-train takes it.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, interrupt)
        try:
            sweep.run_all(ray, todo, table, forwarded, max_concurrent or len(todo), cpus_per_run, gpus_per_run,
                          save)
        finally:
            ray.shutdown()
    table.show(final=True)
    recorded = save(sweep.now())
    sweep.summary(runs, out, table)
    sys.exit(128 + stop[0] if stop else
             0 if recorded and all(r.state in ("finished", "skipped") for r in runs) else 1)


def main(args=None):
    """Entry point of ``dqn-sweep``."""
    run_command(sweep_command, args)
