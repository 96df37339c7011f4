"""Screen preprocessing ``net_downsample_2x_full_y`` (ports ``Scale.lua`` and Torch7 ``image.scale``).

RGB screen in [0, 1] -> luminance -> 84x84 area-averaged downscale -> 7056 values, in Torch7's
float32 arithmetic, so that the stored bytes are the original's.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

OUT_SIZE = 84
LUMINANCE = (np.float32(0.299), np.float32(0.587), np.float32(0.114))


@lru_cache(maxsize=None)
def shrink_plan(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How Torch7's ``image.scale`` shrinks a line of ``n_in`` cells to ``n_out`` (the shrink branch of
    ``Main_scaleLinear_rowcol``): each output cell averages the source cells it covers, the partly
    covered end cells weighted by their covered fraction. The cell bounds are float32 multiples of
    float32 ``n_in / n_out``, so a weight can differ from the exact fraction (at 160 -> 84, source
    158 has weight 0.0952454 in output 82, not 2/21 = 0.0952381).

    Returns:
        ``(index, weight, count)``: int64 and float32 (K, n_out), the source cell and weight of
        each output cell's k-th term (weight 0 past its last term), and float32 (n_out,) the sum
        of its weights as the C code adds them. An output cell is ``sum_k weight[k] src[index[k]]``,
        added in order of k in float32, divided by ``count``.

    Raises:
        ValueError: ``n_out > n_in`` (only shrinking averages areas).
    """
    if n_out > n_in:
        raise ValueError(f"area averaging only shrinks: {n_in} -> {n_out}")
    f32, one = np.float32, np.float32(1)
    scale = f32(n_in) / f32(n_out)
    terms, counts = [], []
    first, first_frac = 0, f32(0)
    for i in range(n_out):
        end = f32(i + 1) * scale
        last = int(end)
        last_frac = end - f32(last)
        cell = [(first, one - first_frac)] + [(j, one) for j in range(first + 1, last)]
        if last < n_in:
            cell.append((last, last_frac))
        terms.append(cell)
        counts.append(sum((w for _, w in cell[1:]), cell[0][1]))  # n = 1 - frac; n += 1 ...; n += last_frac
        first, first_frac = last, last_frac
    k = max(map(len, terms))
    index, weight = np.zeros((k, n_out), np.int64), np.zeros((k, n_out), np.float32)
    for i, cell in enumerate(terms):
        for t, (j, w) in enumerate(cell):
            index[t, i], weight[t, i] = j, w
    return index, weight, np.array(counts, np.float32)


def _shrink_rows(y: np.ndarray, n_out: int) -> np.ndarray:
    """Shrink each row of float32 (H, W) to (H, n_out) as ``shrink_plan`` says."""
    index, weight, count = shrink_plan(y.shape[1], n_out)
    acc = weight[0] * y[:, index[0]]
    for k in range(1, len(index)):
        acc += weight[k] * y[:, index[k]]  # a zero weight adds +0: acc is unchanged
    return acc / count


def scale_y(screen: np.ndarray) -> np.ndarray:
    """Preprocess one pooled ``screen``, float32 (H, W, 3) RGB in [0, 1], normally (210, 160, 3), into
    float32 (7056,) luminance in [0, 1], 84x84 row-major, bit for bit as Torch7 computes it
    (``net_downsample_2x_full_y``: ``nn.Scale``'s ``image.rgb2y`` then ``image.scale``, rows first).
    """
    r, g, b = LUMINANCE
    y = r * screen[..., 0]
    y += g * screen[..., 1]
    y += b * screen[..., 2]
    return _shrink_rows(_shrink_rows(y, OUT_SIZE).T, OUT_SIZE).T.reshape(-1)


def to_bytes(state: np.ndarray) -> np.ndarray:
    """A preprocessed state as the Lua stores it: uint8 ``trunc(255 * y)``, same shape
    (``TransitionTable:add_recent_state``'s ``s:clone():float():mul(255):byte()``); uint8 returned as is."""
    return state if state.dtype == np.uint8 else (state * np.float32(255)).astype(np.uint8)


def preprocess(screen: np.ndarray) -> np.ndarray:
    """The state the agent stores, uint8 (7056,), from a pooled screen as ``scale_y`` takes it. Ports
    ``NeuralQLearner:preprocess`` with ``TransitionTable:add_recent_state``'s byte conversion."""
    return to_bytes(scale_y(screen))
