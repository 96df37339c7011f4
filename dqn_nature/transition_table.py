"""Replay memory (ports ``dqn/TransitionTable.lua``).

One preprocessed frame per agent step is stored once, as uint8; states of
``hist_len`` frames are assembled on demand. Indices are 0-based (Lua index - 1).
"""
from __future__ import annotations

import numpy as np

from .preprocess import to_bytes


def _zero_older_episodes(frames: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Zero, in place, every frame at or before the newest set flag (``concatFrames``).

    frames: uint8 (B, hist_len, state_dim); flags: bool (B, hist_len - 1), the terminal
    flags of all frames but the newest, which is never zeroed.
    """
    zero = np.flip(np.logical_or.accumulate(np.flip(flags, 1), axis=1), 1)
    frames[:, :-1][zero] = 0
    return frames


class TransitionTable:
    """Circular replay memory of (frame, action, reward, terminal) (``TransitionTable``).

    Args:
        state_dim: values per preprocessed frame (7056).
        hist_len: frames per agent state (``recentMemSize``).
        max_size: capacity in transitions; frames cost ``state_dim`` bytes each.
        buffer_size: prefetched samples served by ``sample`` (``bufferSize``).
        rng: ``numpy.random.Generator`` shared with the agent (the Lua's global RNG).

    Memory: ``max_size * (state_dim + 6)`` bytes (frame, action index as uint8, reward,
    flag), allocated lazily by the OS; plus two prefetch buffers of
    ``buffer_size * hist_len * state_dim`` bytes. Frames ``s`` are given as (state_dim,) uint8, or
    float in [0, 1] stored as ``trunc(255 * s)``.
    """

    def __init__(self, state_dim: int, num_actions: int, hist_len: int = 4,
                 max_size: int = 1_000_000, buffer_size: int = 512, rng: np.random.Generator | None = None):
        self.state_dim, self.num_actions, self.hist_len = state_dim, num_actions, hist_len
        self.max_size, self.buffer_size = max_size, buffer_size
        self.rng = rng if rng is not None else np.random.default_rng()
        self.s = np.zeros((max_size, state_dim), np.uint8)
        self.a = np.zeros(max_size, np.uint8)  # action indices (at most 18 actions)
        self.r = np.zeros(max_size, np.float32)
        self.t = np.zeros(max_size, np.bool_)
        self.num_entries = self.insert_index = 0  # insert_index: the next slot add() writes
        # The recent queue starts as zero frames flagged terminal, actions 0.
        self.recent_s = np.zeros((hist_len, state_dim), np.uint8)
        self.recent_t = np.ones(hist_len, np.bool_)
        self.recent_a = np.zeros(hist_len, np.int64)
        self.buf_s = np.zeros((buffer_size, hist_len, state_dim), np.uint8)
        self.buf_s2 = np.zeros(self.buf_s.shape, np.uint8)  # zeros_like would touch its pages now
        self.buf_a = np.zeros(buffer_size, np.int64)
        self.buf_r = np.zeros(buffer_size, np.float32)
        self.buf_term = np.zeros(buffer_size, np.float32)
        self.buf_ind = None  # next unread buffer slot; None until the first fill

    def reset(self) -> None:
        """Forget all transitions (``reset``)."""
        self.num_entries = self.insert_index = 0

    def size(self) -> int:
        """Number of stored transitions (``size``)."""
        return self.num_entries

    def empty(self) -> bool:
        """True when no transition is stored (``empty``)."""
        return self.num_entries == 0

    def add(self, s: np.ndarray, a: int, r: float, term: bool) -> None:
        """Store one transition at the insert position, wrapping at ``max_size`` (``add``)."""
        i = self.insert_index
        self.s[i] = to_bytes(s)
        self.a[i], self.r[i], self.t[i] = a, r, term
        self.num_entries = min(self.num_entries + 1, self.max_size)
        self.insert_index = (i + 1) % self.max_size

    def add_recent_state(self, s: np.ndarray, term: bool) -> None:
        """Push a frame and its terminal flag on the recent queue (``add_recent_state``)."""
        self.recent_s[:-1] = self.recent_s[1:]
        self.recent_s[-1] = to_bytes(s)
        self.recent_t[:-1] = self.recent_t[1:]
        self.recent_t[-1] = term

    def add_recent_action(self, a: int) -> None:
        """Push an action index on the recent queue (``add_recent_action``)."""
        self.recent_a[:-1] = self.recent_a[1:]
        self.recent_a[-1] = a

    def concat_frames(self, index: int, use_recent: bool = False) -> np.ndarray:
        """The ``hist_len`` frames from ``index`` on, uint8 (hist_len, state_dim), older episodes zeroed
        (``concatFrames``); with ``use_recent`` those of the recent queue (``index`` 0: its oldest)."""
        s, t = (self.recent_s, self.recent_t) if use_recent else (self.s, self.t)
        frames = s[index:index + self.hist_len].copy()[None]
        return _zero_older_episodes(frames, t[None, index:index + self.hist_len - 1])[0]

    def get_recent(self) -> np.ndarray:
        """The current agent state: float32 (hist_len, state_dim) in [0, 1] (``get_recent``)."""
        return self.concat_frames(0, use_recent=True).astype(np.float32) / np.float32(255)

    def get(self, index: int):
        """Transition starting at ``index`` (``get``): (s uint8 (hist_len, state_dim), a int, r float,
        s2 like s, term bool); s is frames index..index+hist_len-1, a and r are stored at
        index+hist_len-1, s2 is shifted by one frame, term is the flag at index+hist_len."""
        j = index + self.hist_len - 1
        return (self.concat_frames(index), int(self.a[j]), float(self.r[j]),
                self.concat_frames(index + 1), bool(self.t[j + 1]))

    def sample_one(self):
        """One uniformly drawn transition whose state does not end an episode, as ``get`` returns it
        (``sample_one``).

        Raises:
            RuntimeError: fewer than hist_len + 2 transitions are stored.
        """
        return self.get(int(self.sample_indices(1)[0]))

    def sample_indices(self, n: int) -> np.ndarray:
        """``n`` indices, int64 (n,), each uniform in [1, num_entries - hist_len - 1] and redrawn while
        the flag at index + hist_len - 1 is set (the insert position ignored); each round draws one
        ``rng.random()`` per sample still missing, so the generator advances as by ``n`` single draws.

        Raises:
            RuntimeError: fewer than hist_len + 2 transitions are stored.
        """
        if self.num_entries < self.hist_len + 2:
            raise RuntimeError(f"cannot sample from a replay memory of {self.num_entries} transitions")
        chosen = []
        need = n
        while need:
            cand = 1 + (self.rng.random(need) * (self.num_entries - self.hist_len - 1)).astype(np.int64)
            cand = cand[~self.t[cand + self.hist_len - 1]]
            chosen.append(cand)
            need -= len(cand)
        return np.concatenate(chosen)

    def fill_buffer(self) -> None:
        """Refill the prefetch buffer with ``buffer_size`` samples (``fill_buffer``).

        Raises:
            RuntimeError: fewer than ``buffer_size`` transitions are stored.
        """
        if self.num_entries < self.buffer_size:
            raise RuntimeError(f"the replay memory holds {self.num_entries} transitions, "
                               f"fewer than bufferSize={self.buffer_size}")
        idx = self.sample_indices(self.buffer_size)
        h = self.hist_len
        window = idx[:, None] + np.arange(h + 1)
        flags = self.t[window]
        # Gathered straight into the buffers: no temporaries of tens of MB. The indices are
        # valid; mode="clip" only spares np.take the buffering that "raise" does with out=.
        np.take(self.s, window[:, :h], axis=0, out=self.buf_s, mode="clip")
        np.take(self.s, window[:, 1:], axis=0, out=self.buf_s2, mode="clip")
        _zero_older_episodes(self.buf_s, flags[:, :h - 1])
        _zero_older_episodes(self.buf_s2, flags[:, 1:h])
        self.buf_a[:] = self.a[idx + h - 1]
        self.buf_r[:] = self.r[idx + h - 1]
        self.buf_term[:] = flags[:, h]
        self.buf_ind = 0

    def sample(self, batch_size: int = 1):
        """The next ``batch_size`` prefetched transitions (``sample``).

        The buffer is refilled only when the batch would run past its end, so samples
        can be up to ``buffer_size / batch_size`` calls old. Returns views into the
        buffer, valid until the next refill: s and s2 uint8 (n, hist_len, state_dim),
        a int64 (n,), r float32 (n,), term float32 (n,) (1.0 where s2 is terminal).

        Raises:
            ValueError: ``batch_size >= buffer_size``.
            RuntimeError: a refill with fewer than ``buffer_size`` transitions stored (``fill_buffer``).
        """
        if batch_size >= self.buffer_size:
            raise ValueError(f"batch size {batch_size} must be smaller than bufferSize={self.buffer_size}")
        if self.buf_ind is None or self.buf_ind + batch_size > self.buffer_size:
            self.fill_buffer()
        sl = slice(self.buf_ind, self.buf_ind + batch_size)
        self.buf_ind += batch_size
        return self.buf_s[sl], self.buf_a[sl], self.buf_r[sl], self.buf_s2[sl], self.buf_term[sl]
