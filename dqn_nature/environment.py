"""The Atari environment with alewrap's semantics, on ale-py: ports ``alewrap/GameEnvironment.lua``,
``GameScreen.lua`` and the ROM loading of ``AleEnv.lua``. One agent *step* is ``actrep`` emulator frames.
"""
from __future__ import annotations

import difflib
import json
import math
import os
import re
import warnings

import numpy as np
from ale_py import ALEInterface, ALEState, LoggerMode, roms

from .config import available_memory

ALEInterface.setLoggerMode(LoggerMode.Error)


class GameError(ValueError):
    """An unknown game, a missing ROM file or another game's, or pooled screens that do not fit
    in memory; the message is one line for the user."""


def rom_path(game: str, game_path: str | None = None) -> str:
    """Path of the ROM for ``game`` (an ale-py ROM id such as ``"pong"``): ``<game_path>/<game>.bin``
    where the folder ``game_path`` (the Lua ``-game_path``) holds it, else the ROM that ale-py ships.

    Raises:
        GameError: ale-py knows no such game (the message lists close ROM ids), or the folder's file
            is not ``game``'s ROM by its MD5 (the emulator would hang or play another game).
    """
    ids = roms.get_all_rom_ids()
    if game not in ids:
        close = difflib.get_close_matches(_as_rom_id(game), ids, n=5)  # an exact match comes first
        hint = f"; did you mean {', '.join(close)}?" if close else "; see ale_py.roms.get_all_rom_ids()"
        raise GameError(f"unknown game {game!r}{hint}")
    path = game_path and os.path.join(game_path, f"{game}.bin")
    if path and os.path.isfile(path):
        found = ALEInterface.isSupportedROM(path)
        if found != game:
            raise GameError(f"{path!r} is " + (f"the ROM of {found}, not of {game}" if found else
                                               "no ROM that ALE knows (unknown MD5)")
                            + "; without --game-path the ROM that ale-py ships is used")
        return path
    return str(roms.get_rom_path(game))


def _as_rom_id(name: str) -> str:
    """A game's name in ROM-id form: ``ALE/SpaceInvaders-v5``, ``PongNoFrameskip-v4``, ``PONG`` ->
    ``space_invaders``, ``pong``."""
    name = re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name.rsplit("/", 1)[-1])
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().replace("-", "_")


class GameScreen:
    """The last ``size`` painted RGB frames, uint8 (210, 160, 3), pooled (``pool_type`` "max" or
    "mean") on ``grab()`` into float32 in [0, 1] (``GameScreen.lua``).

    Raises:
        GameError: ``size`` screens beyond the memory available.
    """

    def __init__(self, size: int = 2, pool_type: str = "max"):
        self.size, self.pool_type = size, pool_type
        shape = (size, 210, 160, 3)  # every Atari 2600 screen
        nbytes = math.prod(shape)
        too_big = GameError(f"pool size {size}: its {nbytes / 1e9:,.1f} GB of screens do not fit in memory")
        free = available_memory()  # asked first: a kernel that overcommits allocates more than it holds
        if free is not None and nbytes > free:
            raise too_big
        try:
            self.frames = np.zeros(shape, np.uint8)
        except (MemoryError, ValueError):  # ValueError: beyond NumPy's largest array
            raise too_big from None
        self.count = 0  # frames painted since the last clear()

    def clear(self) -> None:
        """Forget the painted frames (``GameScreen:clear``)."""
        self.count = 0

    def paint_buffer(self) -> np.ndarray:
        """The uint8 slot the caller writes the next frame into, counted as painted (``GameScreen:paint``)."""
        slot = self.frames[self.count % self.size]
        self.count += 1
        return slot

    def grab(self) -> np.ndarray:
        """The frames painted since ``clear()``, at least one, pooled (``GameScreen:grab``): float32
        (210, 160, 3) in [0, 1]."""
        painted = self.frames[: min(self.count, self.size)]
        if self.pool_type == "max":
            pooled = painted.max(axis=0) if len(painted) > 1 else painted[0]
            return np.divide(pooled, np.float32(255), dtype=np.float32)  # one pass: the bytes as float32, / 255
        # As alewrap and Torch7: each frame divided by 255 in float32 when painted, the mean
        # summed in double, rounded to float32 and divided by the count (1 ulp from the mean of bytes / 255).
        frames = painted.astype(np.float32) / np.float32(255)
        return frames.sum(axis=0, dtype=np.float64).astype(np.float32) / np.float32(len(painted))


class GameEnvironment:
    """alewrap's ``GameEnvironment`` on ale-py (deterministic ALE, minimal action set, RGB) for ``game``,
    an ale-py ROM id. ``game_path``: a folder of ``<game>.bin`` ROMs that takes precedence (a
    ``UserWarning`` where it lacks the game's); ``actrep``: frames per agent step; ``random_starts``:
    ``next_random_game()`` plays 1..random_starts no-op frames; ``pool_size``, ``pool_type``: see
    ``GameScreen``; ``seed`` seeds the ALE, the random actions and start lengths.

    Raises:
        GameError: unknown game, missing ROM or another game's, or a pool beyond memory.
    """

    def __init__(self, game: str, game_path: str | None = None, actrep: int = 4,
                 random_starts: int = 30, pool_size: int = 2, pool_type: str = "max", seed: int = 1):
        self.game, self.actrep, self.random_starts = game, actrep, random_starts
        self.ale = ALEInterface()
        self.ale.setInt("random_seed", int(seed))
        self.ale.setFloat("repeat_action_probability", 0.0)
        rom = rom_path(game, game_path)
        if game_path and rom != os.path.join(game_path, f"{game}.bin"):
            warnings.warn(f"no ROM file {os.path.join(game_path, f'{game}.bin')!r} in --game-path {game_path!r}: "
                          f"using the {game} ROM that ale-py ships")
        self.ale.loadROM(rom)
        self.actions = [a.value for a in self.ale.getMinimalActionSet()]
        self._ale_actions = {a.value: a for a in self.ale.getLegalActionSet()}
        self.rng = np.random.default_rng(seed)
        self.screen = GameScreen(pool_size, pool_type)
        self.frame_hook = None  # if set, called with each emulator frame, uint8 (210, 160, 3) (dqn-test)
        self.reward, self.terminal, self.lives = self._step(0)

    def get_actions(self) -> list[int]:
        """The game's minimal action set as ALE action ids (``getActions``)."""
        return list(self.actions)

    def n_obs_feature(self) -> int:
        """Number of values in one screen: 210 * 160 * 3 (``nObsFeature``)."""
        return int(self.screen.frames[0].size)

    def _step(self, action: int) -> tuple[float, bool, int]:
        """One emulator frame, painted on the screen, or a reset if the game is over (``_step``).
        Returns (reward, game over, lives)."""
        if self.ale.game_over():
            self.ale.reset_game()
            reward = 0
        else:
            reward = self.ale.act(self._ale_actions[action])
        frame = self.screen.paint_buffer()
        self.ale.getScreenRGB(frame)
        if self.frame_hook is not None:
            self.frame_hook(frame)
        return reward, self.ale.game_over(), self.ale.lives()

    def get_state(self) -> tuple[np.ndarray, float, bool]:
        """(screen float32 (210, 160, 3) in [0, 1], last reward, last terminal) (``getState``)."""
        return self.screen.grab(), self.reward, self.terminal

    def step(self, action: int, training: bool = False) -> tuple[np.ndarray, float, bool]:
        """Play ALE action id ``action`` for ``actrep`` frames, summing rewards, up to a terminal
        (in training mode, losing a life is one); returns ``get_state()`` (``step``)."""
        total = 0
        for _ in range(self.actrep):
            reward, terminal, lives = self._step(action)
            total += reward
            if training and lives < self.lives:
                terminal = True
            if terminal:
                break
        self.reward, self.terminal, self.lives = total, terminal, lives
        return self.get_state()

    def new_game(self) -> tuple[np.ndarray, float, bool]:
        """Finish the running game with random actions unless terminal, then one no-op (``newGame``):
        after a life-loss terminal the game goes on; after game over the ALE resets."""
        terminal = self.terminal
        while not terminal:
            _, terminal, _ = self._step(self.actions[self.rng.integers(len(self.actions))])
        self.screen.clear()
        self.reward, self.terminal, self.lives = self._step(0)
        return self.get_state()

    def next_random_game(self, k: int | None = None) -> tuple[np.ndarray, float, bool]:
        """``new_game()`` then ``k`` no-op frames, ``k`` uniform in 1..random_starts (1 when
        random_starts is 0) unless given (``nextRandomGame``). Returns ``get_state()``."""
        self.new_game()
        if k is None:
            k = int(self.rng.integers(1, max(1, self.random_starts) + 1))
        for _ in range(k - 1):
            self._step(0)
        self.reward, self.terminal, self.lives = self._step(0)
        return self.get_state()

    def clone_state(self) -> dict:
        """Everything needed to continue exactly from here: the emulator (with its RNG), the
        screen buffer, the last reward/terminal/lives and the random generator. Values are
        NumPy arrays, numbers and strings (for a checkpoint file). No Lua counterpart."""
        return dict(ale=np.frombuffer(self.ale.cloneState(include_rng=True).serialize(), np.uint8),
                    rng=json.dumps(self.rng.bit_generator.state), frames=self.screen.frames.copy(),
                    count=self.screen.count, reward=self.reward, terminal=bool(self.terminal),
                    lives=self.lives)

    def restore_state(self, state: dict) -> None:
        """Continue from a ``clone_state()`` of the same game. No Lua counterpart."""
        self.ale.restoreState(ALEState(np.asarray(state["ale"], np.uint8).tobytes()))
        self.rng.bit_generator.state = json.loads(state["rng"])
        self.screen.frames[:] = state["frames"]
        self.screen.count = int(state["count"])
        self.reward, self.terminal, self.lives = state["reward"], bool(state["terminal"]), int(state["lives"])
