"""``dqn-test``: watch a trained network play (the port of ``dqn/test_agent.lua``).

Each game is played as ``train_agent.lua``'s evaluation plays its episodes: the first
starts with ``newGame()`` (which plays out the running game at random), the next ones
with ``nextRandomGame()``; actions come from ``perceive(..., testing=True, testing_ep)``;
losing a life does not end the episode. The screens can be written as a GIF or a video
(every emulator frame, or one per agent step) and the steps as a CSV.

``--protocol nature`` (``evaluate`` from Python) plays the Nature paper's evaluation instead
and summarises it against the paper's, random and human scores (``scores``).
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
from fractions import Fraction
from typing import Iterator

import click
import numpy as np
from click.core import ParameterSource

from .console import LuaCommand, StopRequest, fail, os_reason, run_command
from .config import SEED_LIMIT, TESTING_EP, Config, ConfigError, build, layered
from .environment import GameEnvironment, GameError
from .files import atomic_path, standard_stream, unwritable, written_in_place
from .history import HistoryError
from .scores import human_normalised, reference

FPS = 60  # emulator frames per second of an NTSC Atari
VIDEO_CONTAINERS = {".mp4": "mp4", ".mkv": "matroska", ".mov": "mov"}


@dataclasses.dataclass
class Episode:
    """One game: ``score`` (sum of rewards), ``steps`` (agent steps), ``frames`` (emulator
    frames of those steps), ``finished`` (False when cut by ``max_steps``)."""

    score: float
    steps: int
    frames: int
    finished: bool


@dataclasses.dataclass
class Step:
    """One agent step of ``play``. ``episode``, ``step``: 0-based; ``action``: index in the
    action set; ``reward``: of this step; ``score``: the episode's after it; ``frames``: the
    emulator frames it played, uint8 (210, 160, 3) each; ``q``: float32 (n_actions,) Q-values
    of the state the action was chosen in (None unless asked for); ``episode_end``: set on an
    episode's last step."""

    episode: int
    step: int
    action: int
    reward: float
    score: float
    frames: list
    q: np.ndarray | None = None
    episode_end: Episode | None = None


def play(env: GameEnvironment, agent, episodes: int = 1, testing_ep: float = TESTING_EP,
         max_steps: int | None = None, with_q: bool = False, max_frames: int | None = None,
         random_first: bool = False) -> Iterator[Step]:
    """Play ``episodes`` games and yield every agent step (the loop of ``test_agent.lua``).

    Args:
        env: the game. Its ``frame_hook``, if set, is called with every emulator frame (the
            agent's steps', and those of the games' starts); it is restored at each step's end.
        agent: a ``NeuralQLearner`` holding the trained network (it is not trained).
        testing_ep: exploration rate. max_steps: cut an episode after this many agent steps.
        with_q: compute each step's Q-values (one more forward pass per step).
        max_frames: cut an episode after as many agent steps as fit in this many emulator
            frames (exactly this many frames when actrep divides it), counted from its first
            agent step: the no-op frames of its start are not counted.
        random_first: start the first episode with ``next_random_game()`` as the later ones,
            instead of ``new_game()`` (``test_agent.lua``).

    Raises:
        ValueError: ``max_frames`` below ``env.actrep`` (not one agent step), on the first
            ``next()``.
    """
    import torch

    limit = max_steps
    if max_frames is not None:
        if max_frames < env.actrep:
            raise ValueError(f"a cap of {max_frames} frames is less than one agent step ({env.actrep} frames)")
        limit = min(limit or max_frames, max_frames // env.actrep)
    actions = env.get_actions()
    outer = env.frame_hook
    screen, reward, terminal = env.next_random_game() if random_first else env.new_game()
    for episode in range(episodes):
        if episode:
            screen, reward, terminal = env.next_random_game()
        score, step, frames = 0.0, 0, 0
        while not terminal and (limit is None or step < limit):
            action = agent.perceive(reward, screen, terminal, testing=True, testing_ep=testing_ep)
            q = None
            if with_q:
                with torch.inference_mode():
                    state = torch.from_numpy(agent.transitions.get_recent()).to(agent.device)
                    q = agent.network(state[None]).float().cpu().numpy()[0]
            captured = []

            def capture(frame, captured=captured):
                captured.append(frame.copy())
                if outer is not None:
                    outer(frame)

            env.frame_hook = capture
            try:
                screen, reward, terminal = env.step(actions[action])
            finally:
                env.frame_hook = outer
            score += reward
            frames += len(captured)
            step += 1
            end = Episode(score, step, frames, terminal) if terminal or step == limit else None
            yield Step(episode, step - 1, action, reward, score, captured, q, end)


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How networks are evaluated: ``episodes`` games at exploration rate ``testing_ep``, each
    one, the first too, started by ``nextRandomGame`` (1..``random_starts`` no-op frames) and
    cut after ``max_frames`` emulator frames or ``max_steps`` agent steps (as ``play``'s
    arguments of those names; None: no cap) if it has not ended. No Lua counterpart: DQN 3.0's
    evaluations play a fixed number of agent steps.
    """

    name: str
    episodes: int
    testing_ep: float
    random_starts: int
    max_frames: int | None = None
    max_steps: int | None = None

    def cap(self) -> str | None:
        """The cap in words ("18000 frames", "500 agent steps"); None without one."""
        if self.max_frames is not None:
            return f"{self.max_frames} frames"
        return None if self.max_steps is None else f"{self.max_steps} agent steps"

    def describe(self, actrep: int) -> str:
        """One line: the protocol played with ``actrep`` frames per agent step."""
        cap = self.cap()
        if cap and self.max_frames is not None:
            cap += f" ({self.max_frames // actrep} agent steps)"
        starts = "1 no-op frame" if self.random_starts <= 1 else f"1..{self.random_starts} no-op frames"
        return (f"{self.episodes} episode(s){' of at most ' + cap if cap else ''}, each after {starts}, "
                f"epsilon {self.testing_ep:g}")

    def play(self, env: GameEnvironment, agent, with_q: bool = False) -> Iterator[Step]:
        """``play`` the protocol's episodes with ``agent`` on ``env``.

        Raises:
            ValueError: ``env`` plays other no-op starts than ``random_starts`` (make it with
                ``random_starts=protocol.random_starts``), or a frame cap below one agent step.
        """
        if env.random_starts != self.random_starts:
            raise ValueError(f"the game plays 1..{env.random_starts} no-op frames at a start, protocol {self.name} "
                             f"1..{self.random_starts}: make it with random_starts={self.random_starts}")
        return play(env, agent, self.episodes, self.testing_ep, self.max_steps, with_q, self.max_frames,
                    random_first=True)


NATURE = Protocol("nature", episodes=30, testing_ep=0.05, random_starts=30, max_frames=18_000)
"""The evaluation of the Nature paper's table (Mnih et al. 2015, Methods): 30 episodes of at
most 5 minutes (18,000 emulator frames at 60 fps: 4,500 agent steps at actrep 4), each after up
to 30 no-op actions, at epsilon 0.05. The no-ops are DQN 3.0's ``nextRandomGame``: 1..30 no-op
emulator frames, before the 18,000 frames of the agent's steps; DQN Zoo counts them in agent
steps instead (1..30 steps, up to 120 frames)."""
PROTOCOLS = {"nature": NATURE}


@dataclasses.dataclass
class Evaluation:
    """The ``episodes`` of a ``protocol`` played on ``game`` (ale-py ROM id), and their summary.
    No Lua counterpart."""

    game: str
    protocol: Protocol
    episodes: list[Episode]

    @property
    def scores(self) -> np.ndarray:
        """Each episode's score, float64 (episodes,), in game points."""
        return np.array([e.score for e in self.episodes], np.float64)

    @property
    def cut(self) -> int:
        """How many episodes the cap ended."""
        return sum(not e.finished for e in self.episodes)

    def summary(self) -> str:
        """Three lines: episodes, mean, standard deviation (population), min/max and how many
        were cut; the human-normalised mean, ``100 (mean - random) / (human - random)`` in
        percent; the Nature paper's DQN score. Raises ValueError without episodes."""
        if not self.episodes:
            raise ValueError("no episode was played")
        scores, ref = self.scores, reference(self.game)
        cap = f"; {self.cut} of {len(scores)} cut at {self.protocol.cap()}" if self.protocol.cap() else ""
        lines = [f"Protocol {self.protocol.name}, {self.game}: {len(scores)} episode(s), mean score {scores.mean():g}, "
                 f"std {scores.std():g}, min {scores.min():g}, max {scores.max():g}{cap}"]
        normalised = human_normalised(scores.mean(), self.game)
        lines.append(f"Human-normalised score: {normalised:.1f}% (random {ref.random:g}, human {ref.human:g})"
                     if normalised is not None else f"Human-normalised score: no random and human scores for {self.game}")
        if ref.nature_mean is None:
            lines.append(f"Nature DQN score: none known for {self.game}")
        else:
            std = f" (std {ref.nature_std:g})" if ref.nature_std is not None else ""
            lines.append(f"Nature DQN score: {ref.nature_mean:g}{std}")
        return "\n".join(lines)


def agent_for(state: dict, actions: list[int], gpu: int = -1, seed: int = 1):
    """A ``NeuralQLearner`` that plays the ``convnet_atari3`` network ``state`` (as
    ``networks.load_network`` returns it) with ALE action ids ``actions``, on CUDA device
    ``gpu`` (-1: the CPU): its replay memory holds just the recent frames it acts on.
    No Lua counterpart (``test_agent.lua`` loaded the whole saved agent)."""
    from .neural_q_learner import NeuralQLearner

    hist_len = state["conv1.weight"].shape[1]
    agent = NeuralQLearner(actions, gpu=gpu, seed=seed, hist_len=hist_len, replay_memory=hist_len + 32,
                           bufferSize=32)
    agent.network.load_state_dict(state)
    return agent


def evaluate(env: GameEnvironment, agent, protocol: Protocol = NATURE) -> Evaluation:
    """Play ``protocol`` (the Nature paper's by default) and return its episodes and summary.

    Example::

        state, run = load_network("pong.h5", best=True)
        env = GameEnvironment("pong", random_starts=NATURE.random_starts, seed=1)
        result = evaluate(env, agent_for(state, env.get_actions()))
        print(result.scores)  # float64 (30,), one score per episode
        print(result.summary())

    Args:
        env: the game, made with ``random_starts=protocol.random_starts`` (and the actrep and
            frame pooling the network was trained with); its ``frame_hook`` sees every frame.
        agent: a ``NeuralQLearner`` holding the network (``agent_for`` makes one).
        protocol: ``NATURE``, or another (``dataclasses.replace(NATURE, max_frames=...)``).

    Raises:
        ValueError: as ``Protocol.play``.
    """
    steps = protocol.play(env, agent)
    return Evaluation(env.game, protocol, [s.episode_end for s in steps if s.episode_end])


def draw_overlay(frame: np.ndarray, text: str) -> np.ndarray:
    """``frame`` (uint8 (H, W, 3)) with ``text`` in white on black in its bottom-left corner."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image)
    left, top, right, bottom = draw.textbbox((2, 0), text)
    y = image.height - (bottom - top) - 3
    draw.rectangle((0, y - 1, right + 2, image.height), fill=(0, 0, 0))
    draw.text((2, y - top), text, fill=(255, 255, 255))
    return np.asarray(image)


def _paletted(frame: np.ndarray):
    """An RGB frame as a Pillow "P" image, exactly when it has at most 256 colours
    (an Atari screen has at most 128)."""
    from PIL import Image

    packed = (frame[..., 0].astype(np.uint32) << 16) | (frame[..., 1].astype(np.uint32) << 8) | frame[..., 2]
    colors, index = np.unique(packed, return_inverse=True)
    if colors.size > 256:
        return Image.fromarray(np.ascontiguousarray(frame)).quantize(256)
    image = Image.frombytes("P", (frame.shape[1], frame.shape[0]), index.astype(np.uint8).tobytes())
    image.putpalette(np.stack([colors >> 16, (colors >> 8) & 255, colors & 255], 1).astype(np.uint8).tobytes())
    return image


class GifWriter:
    """Streams RGB frames into an endlessly looping animated GIF with Pillow's GIF encoder,
    one frame at a time (a game's frames need not fit in memory): each frame is cropped to
    the region that changed and carries its own palette. Ports ``test_agent.lua``'s GIF (gd's
    ``gifAnimBegin``, ``gifAnimAdd``, ``gifAnimEnd``), which used one palette for all frames.

    Args:
        fh: binary file open for writing. delay_cs: display time of a frame, centiseconds.
    """

    def __init__(self, fh, delay_cs: int):
        self.fh, self.delay_ms, self.previous = fh, 10 * delay_cs, None

    def append(self, frame: np.ndarray) -> None:
        """Add a frame, uint8 (H, W, 3), the size of the first."""
        from PIL import GifImagePlugin

        if self.previous is None:
            header, _ = GifImagePlugin.getheader(_paletted(frame), info={"loop": 0})
            self.fh.write(b"".join(header))
            left = top = 0
            right, bottom = frame.shape[1], frame.shape[0]
        else:
            changed = np.any(frame != self.previous, axis=2)
            rows, cols = np.flatnonzero(changed.any(1)), np.flatnonzero(changed.any(0))
            if rows.size:
                left, top, right, bottom = cols[0], rows[0], cols[-1] + 1, rows[-1] + 1
            else:
                left, top, right, bottom = 0, 0, 1, 1
        image = _paletted(frame[top:bottom, left:right])
        self.fh.write(b"".join(GifImagePlugin.getdata(image, offset=(int(left), int(top)), duration=self.delay_ms,
                                                      disposal=1, include_color_table=True)))
        self.previous = frame

    def close(self) -> None:
        """End the GIF (its trailer); the file stays open."""
        self.fh.write(b";")  # GIF trailer


class VideoWriter:
    """Pipes RGB frames to imageio-ffmpeg's ffmpeg, which encodes them with H.264 into ``path``.
    imageio_ffmpeg.write_frames is not used: it ignores ffmpeg's exit status, so a video that
    ffmpeg failed to write (a full disk) passed for a good one. No Lua counterpart.

    Args:
        path: the file ffmpeg writes (replaced if it exists).
        size: (height, width) of the frames, in pixels.
        fps: frames per second of the video (60 / emulator frames per image).
        container: ffmpeg's name of the file format ("mp4", "matroska", "mov").
    """

    def __init__(self, path: str, size, fps: Fraction, container: str):
        import imageio_ffmpeg

        self.log = tempfile.TemporaryFile()  # ffmpeg's messages: a failure is told in one line
        self.ffmpeg = subprocess.Popen(
            [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
             "-s", f"{size[1]}x{size[0]}", "-r", str(fps), "-i", "-", "-an", "-vcodec", "libx264", "-crf", "25",
             "-pix_fmt", "yuv420p", "-f", container, path],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.log,
            process_group=0)  # Ctrl-C stops dqn-test's play, not ffmpeg: the video is still finished

    def append(self, frame: np.ndarray) -> None:
        """Add a frame, uint8 (H, W, 3). Raises BrokenPipeError once ffmpeg has stopped."""
        self.ffmpeg.stdin.write(frame)

    def close(self) -> None:
        """Wait for ffmpeg to finish the file. Raises OSError if it failed."""
        with contextlib.suppress(BrokenPipeError):  # ffmpeg has stopped: its exit status says why
            self.ffmpeg.stdin.close()
        status = self.ffmpeg.wait()
        self.log.seek(0)
        said = self.log.read().decode(errors="replace").strip().splitlines()
        self.log.close()
        if status < 0:
            raise OSError(f"ffmpeg was killed by {signal.Signals(-status).name}")
        if status:
            raise OSError(f"ffmpeg exit status {status}" + (f": {said[-1].strip()}" if said else ""))


def _open_outputs(stack: contextlib.ExitStack, gif_file, video, csv_file, per_image: int, size, names):
    """Open the GIF, video and CSV outputs (each written under a temporary name, renamed when
    ``stack`` closes without error). Returns (functions taking a uint8 (H, W, 3) frame, csv
    writer or None). Raises OSError."""
    def open_output(path, mode, **kwargs):
        stream = standard_stream(path)
        if stream:
            return stack.enter_context(open(os.dup(stream.fileno()), mode, **kwargs))
        return stack.enter_context(open(stack.enter_context(atomic_path(path)), mode, **kwargs))

    sinks, rows = [], None
    if gif_file:
        fh = open_output(gif_file, "wb")
        gif = GifWriter(fh, max(2, round(100 * per_image / FPS)))
        stack.callback(gif.close)
        sinks.append(gif.append)
    if video:
        writer = VideoWriter(stack.enter_context(atomic_path(video)), size, Fraction(FPS, per_image),
                             VIDEO_CONTAINERS[os.path.splitext(video)[1].lower()])
        stack.callback(writer.close)
        sinks.append(writer.append)
    if csv_file:
        fh = open_output(csv_file, "w", newline="")
        rows = csv.writer(fh)
        rows.writerow(["episode", "step", "action", "reward", *(f"q_{n}" for n in names)])
    return sinks, rows


def _action_name(action: int) -> str:
    from ale_py import Action

    return Action(action).name


def _option(name: str, *aliases: str, **kwargs):
    """A click option spelled ``--gif-file`` and ``-gif_file`` (as ``test_agent.lua``)."""
    return click.option(f"--{name}", f"-{name.replace('-', '_')}", *aliases, name.replace("-", "_"), **kwargs)


_DEFAULTS = Config()
# Options the network's run stored (its history's or snapshot's arguments) that dqn-test plays
# with unless given: the network was trained to act on these.
RUN_OPTIONS = ("game", "actrep", "random_starts", "pool_type", "pool_size")


@click.command(cls=LuaCommand, context_settings=dict(help_option_names=["-h", "--help"],
                                                  max_content_width=110))
@_option("game", "--env", "-env",
         help="ale-py ROM id of the game (pong, breakout, ...)  [default: the network's run's]")
@_option("game-path", help="folder of <game>.bin ROMs that takes precedence over ale-py's")
@_option("network", required=True, help="trained network: a .h5 history, a .params.h5, a DQN 3.0 .t7 snapshot or .params.t7")
@_option("best", is_flag=True, help="play the best evaluated network (best_model); a history holding only one "
         "network plays that one, --best or not")
@_option("episodes", type=click.IntRange(1), default=1, show_default=True, help="games to play")
@_option("testing-ep", type=click.FloatRange(0, 1), default=TESTING_EP, show_default=True, help="exploration rate")
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

    from . import train as training
    from .networks import LABELS, load_network, network_misfit

    if testing_ep != testing_ep:  # NaN passes click's FloatRange
        fail("--testing-ep must be in [0, 1], not nan")
    if protocol:
        overridden = [name for name in ("episodes", "testing_ep", "random_starts", "max_steps")
                      if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
        protocol = PROTOCOLS[protocol]
        overrides = {name: ctx.params[name] for name in overridden}
        if "max_steps" in overrides:
            overrides["max_frames"] = None
        protocol = dataclasses.replace(protocol, **overrides)
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
    checks = ((merged, ""),)
    if merged.get("game"):
        checks = (({**run, "game": merged["game"]}, f"{network}: "),) + checks
    for values, source in checks:
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
    misfit = network_misfit(state, options.game, len(actions))  # its hist_len is the network's
    if misfit:
        fail(f"{network}: {misfit}")
    if gif_file and os.path.splitext(gif_file)[1].lower() != ".gif":
        fail(f"--gif-file {gif_file}: use a .gif file")
    if video:
        if os.path.splitext(video)[1].lower() not in VIDEO_CONTAINERS:
            fail(f"--video {video}: use a .mp4, .mkv or .mov file")
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            fail("--video needs imageio-ffmpeg: pip install imageio-ffmpeg")
    outputs = {}  # real path -> option
    for option, path in (("--gif-file", gif_file), ("--video", video), ("--csv-file", csv_file)):
        if path is None:
            continue
        problem = unwritable(path) if path else "give a file name"
        if problem:
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
    if protocol and protocol.max_frames is not None and protocol.max_frames < options.actrep:
        fail(f"--actrep {options.actrep}: one agent step is longer than protocol {protocol.name}'s cap of "
             f"{protocol.max_frames} frames")
    if protocol:
        changed = f", changed by {', '.join('--' + n.replace('_', '-') for n in overridden)}" if overridden else ""
        click.echo(f"dqn-test: protocol {protocol.name}{changed}: {protocol.describe(options.actrep)}", err=True)
    device = training.resolve_device(gpu, lambda m: click.echo(m, err=True))
    training.set_threads(threads)
    torch.manual_seed(seed)
    agent = agent_for(state, actions, device, seed)
    names = [_action_name(a) for a in actions]
    per_image = options.actrep if frame_skip else 1  # emulator frames shown by one image
    results, stop = [], StopRequest()
    try:  # a full disk fails both a write and the closing of the files: report it once
        with contextlib.ExitStack() as stack:
            try:
                sinks, rows = _open_outputs(stack, gif_file, video, csv_file, per_image, env.screen.frames.shape[1:3],
                                            names)
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
                    for sink in sinks:
                        sink(frame)
                if s.episode_end:
                    e = s.episode_end
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
