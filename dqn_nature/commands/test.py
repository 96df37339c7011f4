"""``dqn-test``: watch a trained network play (the port of ``dqn/test_agent.lua``; its library
is ``play.py``)."""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib.util
import os
import sys
from fractions import Fraction

import click
import numpy as np
from click.core import ParameterSource

from ..config import SEED_LIMIT, TESTING_EP, Config, ConfigError, build, layered
from ..console import CONTEXT, FiniteFloatRange, LuaCommand, StopRequest, fail, run_command
from ..environment import GameEnvironment, GameError
from ..files import atomic_path, os_reason, standard_stream, unwritable, written_in_place
from ..history import HistoryError
from ..play import FPS, PROTOCOLS, VIDEO_CONTAINERS, Evaluation, GifWriter, VideoWriter, agent_for, draw_overlay, play


def _open_outputs(stack: contextlib.ExitStack, gif_file, video, csv_file, per_image: int, size, names):
    """Open the GIF, video and CSV outputs (each written under a temporary name, renamed when
    ``stack`` closes without error, after the writers' ``close``). Returns (the GIF and video
    writers, csv writer or None). Raises OSError."""
    def open_output(path, mode, **kwargs):
        stream = standard_stream(path)
        target = os.dup(stream.fileno()) if stream else stack.enter_context(atomic_path(path))
        return stack.enter_context(open(target, mode, **kwargs))

    writers, rows = [], None
    if gif_file:
        writers.append(GifWriter(open_output(gif_file, "wb"), max(2, round(100 * per_image / FPS))))
    if video:
        writers.append(VideoWriter(stack.enter_context(atomic_path(video)), size, Fraction(FPS, per_image),
                                   VIDEO_CONTAINERS[os.path.splitext(video)[1].lower()]))
    for writer in writers:
        stack.callback(writer.close)
    if csv_file:
        rows = csv.writer(open_output(csv_file, "w", newline=""))
        rows.writerow(["episode", "step", "action", "reward", *(f"q_{n}" for n in names)])
    return writers, rows


def _option(name: str, *aliases: str, **kwargs):
    """A click option spelled ``--gif-file`` and ``-gif_file`` (as ``test_agent.lua``)."""
    return click.option(f"--{name}", f"-{name.replace('-', '_')}", *aliases, name.replace("-", "_"), **kwargs)


_DEFAULTS = Config()
# The stored options of the network's run that dqn-test plays with unless given: it was trained on these.
RUN_OPTIONS = ("game", "actrep", "random_starts", "pool_type", "pool_size")


@click.command(cls=LuaCommand, context_settings=CONTEXT)
@_option("game", "--env", "-env",
         help="ale-py ROM id of the game (pong, breakout, ...)  [default: the network's run's]")
@_option("game-path", help="folder of <game>.bin ROMs that takes precedence over ale-py's")
@_option("network", required=True, help="trained network: a .h5 history, a .params.h5, a DQN 3.0 .t7 snapshot or .params.t7")
@_option("best", is_flag=True, help="play the best evaluated network (best_model); a history holding only one "
         "network plays that one, --best or not")
@_option("episodes", type=click.IntRange(1), default=1, show_default=True, help="games to play")
@_option("testing-ep", type=FiniteFloatRange(0, 1), default=TESTING_EP, show_default=True, help="exploration rate")
@_option("max-steps", type=click.IntRange(1), help="stop an episode after this many agent steps")
@_option("actrep", type=click.IntRange(1), help=f"frames per agent step  [default: the run's, else {_DEFAULTS.actrep}]")
@_option("random-starts", type=click.IntRange(0), help="episodes after the first start after 1..random_starts "
         f"no-op frames  [default: the run's, else {_DEFAULTS.random_starts}]")
@_option("pool-frms", help="frame pooling as a Lua table body, as dqn-train's  [default: the run's, else "
         f'type="{_DEFAULTS.pool_type}",size={_DEFAULTS.pool_size}]')
@_option("gif-file", help="write the screens as an animated GIF")
@_option("video", help="write the screens as a video (.mp4, .mkv or .mov; needs imageio-ffmpeg)")
@_option("frame-skip", is_flag=True, help="GIF/video: one frame per agent step instead of every emulator frame")
@_option("overlay", is_flag=True, help="GIF/video: draw the score and the chosen action in a corner")
@_option("csv-file", help="write one row per agent step: episode, step, action, reward, Q-values (an existing "
         "file is replaced only if it is a .csv)")
@_option("protocol", type=click.Choice(sorted(PROTOCOLS)),
         help="play a paper's evaluation and summarise it: nature = 30 episodes of at most 18000 frames (5 "
         "minutes) each, every one (the first too) after 1..30 no-op frames as DQN 3.0's nextRandomGame (DQN "
         "Zoo counts its no-ops in agent steps instead), epsilon 0.05; prints the mean, std, min/max, the "
         "human-normalised score and the paper's. --episodes, --testing-ep, --random-starts and --max-steps "
         "(which replaces the frame cap) given with it override its values, and the protocol played is printed")
@_option("seed", type=click.IntRange(0, SEED_LIMIT - 1), default=_DEFAULTS.seed, show_default=True, help="random seed")
@_option("gpu", type=click.IntRange(-1), default=-1, show_default=True, help="CUDA device; -1: the CPU")
@_option("threads", type=click.IntRange(1), default=1, show_default=True, help="torch CPU threads")
@click.pass_context
def test_command(ctx, game, game_path, network, best, episodes, testing_ep, max_steps, actrep, random_starts,
                 pool_frms, gif_file, video, frame_skip, overlay, csv_file, protocol, seed, gpu, threads):
    """Watch a trained network play GAME: print each episode's score and length, optionally
    write a GIF, a video and a CSV of the steps.

    Episodes are played as train_agent.lua's evaluations play them (full games, epsilon
    0.05), with the game, actrep, random_starts and frame pooling of the run that trained the
    network where its file stores them and no option is given. GIF frame delays are whole
    centiseconds, so a GIF of every frame plays at 50 fps (5/6 of the game's 60); a video
    plays at exactly 60 fps (60/actrep with --frame-skip). Ctrl-C stops after the current
    step and still writes the files (exit status 130).

    --protocol nature plays the Nature paper's evaluation instead and ends with its summary.
    """
    import torch
    from ale_py import Action

    from .. import train as training
    from ..network_files import LABELS, load_network, network_misfit

    if protocol:
        overridden = [name for name in ("episodes", "testing_ep", "random_starts", "max_steps")
                      if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
        overrides = {name: ctx.params[name] for name in overridden}
        if "max_steps" in overrides:
            overrides["max_frames"] = None
        protocol = dataclasses.replace(PROTOCOLS[protocol], **overrides)
        random_starts = protocol.random_starts
    try:
        state, stored = load_network(network, best, only=lambda which: click.echo(
            f"dqn-test: note: {network} holds only its {LABELS[which]} ({which}): playing it", err=True))
    except HistoryError as e:
        fail(str(e))
    given = {k: v for k, v in dict(game=game, actrep=actrep, random_starts=random_starts).items() if v is not None}
    try:
        given = layered(given, pool_frms=pool_frms)
    except ConfigError as e:
        fail(f"--pool-frms {pool_frms!r}: {e}")
    run = {k: stored[k] for k in RUN_OPTIONS if stored.get(k) is not None and k not in given}
    merged = {**run, **given}
    # The stored options are checked on their own first, so that an error names their file;
    # with the game to be played, which build requires (a missing one is the user's to give).
    checks = [({**run, "game": merged["game"]}, f"{network}: ")] if merged.get("game") else []
    for values, source in [*checks, (merged, "")]:
        try:
            options = build(values)
        except ConfigError as e:
            fail(f"{source}{e}")
    try:
        env = GameEnvironment(options.game, game_path, options.actrep, options.random_starts, options.pool_size,
                              options.pool_type, seed=seed)
    except GameError as e:
        fail(f"{network}: {e}" if "game" in run else str(e))
    actions = env.get_actions()
    if misfit := network_misfit(state, options.game, len(actions)):  # its hist_len is the network's
        fail(f"{network}: {misfit}")
    if gif_file and os.path.splitext(gif_file)[1].lower() != ".gif":
        fail(f"--gif-file {gif_file}: use a .gif file")
    if video:
        if os.path.splitext(video)[1].lower() not in VIDEO_CONTAINERS:
            fail(f"--video {video}: use a .mp4, .mkv or .mov file")
        if importlib.util.find_spec("imageio_ffmpeg") is None:
            fail("--video needs imageio-ffmpeg: pip install imageio-ffmpeg")
    outputs = {}  # real path -> option
    for option, path in (("--gif-file", gif_file), ("--video", video), ("--csv-file", csv_file)):
        if path is None:
            continue
        if problem := (unwritable(path) if path else "give a file name"):
            fail(f"cannot write {option} {path}: {problem}")
        real = os.path.realpath(path)
        if real in outputs:
            fail(f"{option} {path} is also the {outputs[real]}; give each output its own file")
        outputs[real] = option
    if csv_file and os.path.isfile(csv_file) and not written_in_place(csv_file) and (
            os.path.splitext(csv_file)[1].lower() != ".csv"):
        fail(f"--csv-file {csv_file} exists and is not a .csv file; give another name")
    taken = [f"{k} {getattr(options, k)}" for k in run if k != "game" and getattr(options, k) != getattr(_DEFAULTS, k)]
    if taken:
        click.echo(f"dqn-test: note: {', '.join(taken)} from the network's run", err=True)
    if stored.get("game") not in (None, options.game):
        click.echo(f"dqn-test: note: the network was trained on {stored['game']}", err=True)
    if protocol:
        if protocol.max_frames is not None and protocol.max_frames < options.actrep:
            fail(f"--actrep {options.actrep}: one agent step is longer than protocol {protocol.name}'s cap of "
                 f"{protocol.max_frames} frames")
        changed = f", changed by {', '.join('--' + n.replace('_', '-') for n in overridden)}" if overridden else ""
        click.echo(f"dqn-test: protocol {protocol.name}{changed}: {protocol.describe(options.actrep)}", err=True)
    device = training.resolve_device(gpu, lambda m: click.echo(m, err=True))
    training.set_threads(threads)
    torch.manual_seed(seed)
    agent = agent_for(state, actions, device, seed)
    names = [Action(a).name for a in actions]
    per_image = options.actrep if frame_skip else 1  # emulator frames shown by one image
    results, stop = [], StopRequest()
    try:  # a full disk fails both a write and the closing of the files: report it once
        with contextlib.ExitStack() as stack:
            try:
                writers, rows = _open_outputs(stack, gif_file, video, csv_file, per_image,
                                              env.screen.frames.shape[1:3], names)
            except OSError as e:
                fail(f"cannot open the output files: {os_reason(e)}")
            with_q = rows is not None
            steps = (protocol.play(env, agent, with_q) if protocol
                     else play(env, agent, episodes, testing_ep, max_steps, with_q))
            for s in steps:
                if rows is not None:
                    rows.writerow([s.episode, s.step, s.action, s.reward, *s.q.tolist()])
                for frame in (s.frames[-1:] if frame_skip else s.frames):
                    if overlay:
                        frame = draw_overlay(frame, f"{s.score:g} {names[s.action]}")
                    for writer in writers:
                        writer.append(frame)
                if e := s.episode_end:
                    results.append(e)
                    cut = f"cut at {protocol.cap()}" if protocol else f"stopped at --max-steps {max_steps}"
                    click.echo(f"Episode {s.episode}: score {e.score:g}, {e.steps} steps, {e.frames} frames"
                               + ("" if e.finished else f" ({cut})"))
                if stop.signum is not None:
                    break
    except OSError as e:
        fail(f"cannot write the output files: {os_reason(e)}", code=1)
    if results and protocol:
        click.echo(Evaluation(options.game, protocol, results).summary())
    elif results:
        scores = np.array([e.score for e in results])
        click.echo(f"Mean score {scores.mean():g}, std {scores.std():g} over {len(scores)} episode(s)")
    for path in (gif_file, video, csv_file):
        if path:
            click.echo(f"Wrote {path}")
    if stop.signum is not None:
        click.echo(f"Stopped by {stop.name} after {len(results)} episode(s); the files hold every step played",
                   err=True)
        sys.exit(128 + stop.signum)


def main(args=None):
    """Entry point of ``dqn-test``."""
    run_command(test_command, args)
