"""Playing a trained network (the playing loop of ``dqn/test_agent.lua``; its command is
``commands/test.py``): episodes, the Nature paper's evaluation protocol summarised against the
paper's, random and human scores, GIF and video writers."""
from __future__ import annotations

import contextlib
import dataclasses
import signal
import subprocess
import tempfile
from fractions import Fraction
from typing import Iterator

import numpy as np

from .config import TESTING_EP
from .environment import GameEnvironment
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
    """One agent step of ``play``. ``episode``, ``step``: 0-based; ``action``: index in the action
    set; ``reward``: of this step; ``score``: the episode's after it; ``frames``: the emulator frames
    it played, uint8 (210, 160, 3) each; ``q``: float32 (n_actions,) Q-values of the state the action
    was chosen in (None unless asked for); ``episode_end``: set on an episode's last step."""

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
    """Play ``episodes`` games and yield every agent step (the loop of ``test_agent.lua``), as
    ``train_agent.lua``'s evaluation plays them: the first starts with ``new_game()`` (which plays
    out the running game at random), the next ones (the first too with ``random_first``) with
    ``next_random_game()``; actions come from ``agent.perceive(..., testing=True, testing_ep)``
    (a ``NeuralQLearner``, not trained); losing a life does not end the episode. ``env.frame_hook``,
    if set, is called with every emulator frame (of the agent's steps and of the games' starts).

    Args:
        max_steps: cut an episode after this many agent steps.
        max_frames: cut an episode after as many agent steps as fit in this many emulator frames
            (exactly this many when actrep divides it), not counting the no-op frames of its start.
        with_q: compute each step's Q-values (one more forward pass per step).

    Raises:
        ValueError: ``max_frames`` below ``env.actrep`` (not one agent step), on the first ``next()``.
    """
    import torch

    limit = max_steps
    if max_frames is not None:
        if max_frames < env.actrep:
            raise ValueError(f"a cap of {max_frames} frames is less than one agent step ({env.actrep} frames)")
        limit = min(limit or max_frames, max_frames // env.actrep)
    actions = env.get_actions()
    outer = env.frame_hook

    def capture(frame):
        captured.append(frame.copy())
        if outer is not None:
            outer(frame)

    for episode in range(episodes):
        screen, reward, terminal = env.next_random_game() if episode or random_first else env.new_game()
        score, step, frames = 0.0, 0, 0
        while not terminal and (limit is None or step < limit):
            action = agent.perceive(reward, screen, terminal, testing=True, testing_ep=testing_ep)
            q = None
            if with_q:
                with torch.inference_mode():
                    state = torch.from_numpy(agent.transitions.get_recent()).to(agent.device)
                    q = agent.network(state[None]).float().cpu().numpy()[0]
            captured = []  # this step's frames, which capture appends to
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
    """How networks are evaluated: ``episodes`` games at exploration rate ``testing_ep``, each (the
    first too) started by ``nextRandomGame`` (1..``random_starts`` no-op frames) and cut, if it has
    not ended, after ``max_frames`` emulator frames or ``max_steps`` agent steps (as ``play``'s;
    None: no cap). No Lua counterpart: DQN 3.0's evaluations play a fixed number of agent steps."""

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
        if self.max_frames is not None:
            cap += f" ({self.max_frames // actrep} agent steps)"
        starts = "1 no-op frame" if self.random_starts <= 1 else f"1..{self.random_starts} no-op frames"
        return (f"{self.episodes} episode(s){' of at most ' + cap if cap else ''}, each after {starts}, "
                f"epsilon {self.testing_ep:g}")

    def play(self, env: GameEnvironment, agent, with_q: bool = False) -> Iterator[Step]:
        """``play`` the protocol's episodes with ``agent`` on ``env``.

        Raises:
            ValueError: ``env`` has other ``random_starts``, or a frame cap below one agent step.
        """
        if env.random_starts != self.random_starts:
            raise ValueError(f"the game plays 1..{env.random_starts} no-op frames at a start, protocol {self.name} "
                             f"1..{self.random_starts}: make it with random_starts={self.random_starts}")
        return play(env, agent, self.episodes, self.testing_ep, self.max_steps, with_q, self.max_frames,
                    random_first=True)


NATURE = Protocol("nature", episodes=30, testing_ep=0.05, random_starts=30, max_frames=18_000)
"""The evaluation of the Nature paper's table (Mnih et al. 2015, Methods): 30 episodes of at most
5 minutes (18,000 emulator frames at 60 fps: 4,500 agent steps at actrep 4) at epsilon 0.05, each
after up to 30 no-op actions: DQN 3.0's ``nextRandomGame``, 1..30 frames before the 18,000 (DQN Zoo
counts them in agent steps instead: 1..30 steps, up to 120 frames)."""
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
        lines.append("Human-normalised score: " + (f"{normalised:.1f}% (random {ref.random:g}, human {ref.human:g})"
                     if normalised is not None else f"no random and human scores for {self.game}"))
        std = f" (std {ref.nature_std:g})" if ref.nature_std is not None else ""
        lines.append(f"Nature DQN score: {ref.nature_mean:g}{std}" if ref.nature_mean is not None
                     else f"Nature DQN score: none known for {self.game}")
        return "\n".join(lines)


def agent_for(state: dict, actions: list[int], gpu: int = -1, seed: int = 1):
    """A ``NeuralQLearner`` that plays the ``convnet_atari3`` network ``state`` (as
    ``network_files.load_network`` returns it) with ALE action ids ``actions``, on CUDA device
    ``gpu`` (-1: the CPU): its replay memory holds just the recent frames it acts on.
    No Lua counterpart (``test_agent.lua`` loaded the whole saved agent)."""
    from .neural_q_learner import NeuralQLearner

    hist_len = state["conv1.weight"].shape[1]
    agent = NeuralQLearner(actions, gpu=gpu, seed=seed, hist_len=hist_len, replay_memory=hist_len + 32,
                           bufferSize=32)
    agent.network.load_state_dict(state)
    return agent


def evaluate(env: GameEnvironment, agent, protocol: Protocol = NATURE) -> Evaluation:
    """Play ``protocol`` (``NATURE``, or another: ``dataclasses.replace(NATURE, max_frames=...)``)
    with ``agent`` (``agent_for`` makes one) on ``env`` (made with ``random_starts=protocol.random_starts``
    and the actrep and frame pooling the network was trained with) and return its episodes and summary.

    Example::

        state, run = load_network("pong.h5", best=True)
        env = GameEnvironment("pong", random_starts=NATURE.random_starts, seed=1)
        result = evaluate(env, agent_for(state, env.get_actions()))
        print(result.scores)  # float64 (30,), one score per episode
        print(result.summary())

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
    ``fh``: a binary file open for writing; ``delay_cs``: display time of a frame, centiseconds.
    """

    def __init__(self, fh, delay_cs: int):
        self.fh, self.delay_ms, self.previous = fh, 10 * delay_cs, None

    def append(self, frame: np.ndarray) -> None:
        """Add a frame, uint8 (H, W, 3), the size of the first."""
        from PIL import GifImagePlugin

        first = self.previous is None
        changed = np.ones(frame.shape[:2], bool) if first else np.any(frame != self.previous, axis=2)
        rows, cols = np.flatnonzero(changed.any(1)), np.flatnonzero(changed.any(0))
        if not rows.size:  # an unchanged frame: its top-left pixel
            rows = cols = np.zeros(1, int)
        image = _paletted(frame[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1])
        if first:  # the GIF's header, from the first frame, which is whole
            self.fh.write(b"".join(GifImagePlugin.getheader(image, info={"loop": 0})[0]))
        self.fh.write(b"".join(GifImagePlugin.getdata(image, offset=(int(cols[0]), int(rows[0])),
                                                      duration=self.delay_ms, disposal=1, include_color_table=True)))
        self.previous = frame

    def close(self) -> None:
        """End the GIF (its trailer); the file stays open."""
        self.fh.write(b";")  # GIF trailer


class VideoWriter:
    """Pipes RGB frames to imageio-ffmpeg's ffmpeg, which encodes them with H.264 into ``path``.
    imageio_ffmpeg.write_frames is not used: it ignores ffmpeg's exit status, so a video that
    ffmpeg failed to write (a full disk) passed for a good one. No Lua counterpart.

    Args:
        path: replaced if it exists. size: (height, width) of the frames, in pixels.
        fps: 60 / emulator frames per image. container: ffmpeg's format name ("mp4", "matroska", "mov").
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
