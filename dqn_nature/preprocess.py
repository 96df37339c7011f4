"""Screen preprocessing ``net_downsample_2x_full_y`` (ports ``Scale.lua`` and Torch7 ``image.scale``).

RGB screen in [0, 1] -> luminance -> 84x84 area-averaged downscale -> 7056 values.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

OUT_SIZE = 84
LUMINANCE = np.array([0.299, 0.587, 0.114], np.float32)


@lru_cache(maxsize=None)
def area_weights(n_in: int, n_out: int) -> np.ndarray:
    """Weights (n_out, n_in) float32 of Torch7's shrinking ``image.scale``: each output cell
    averages the source cells it covers, partly covered end cells weighted by their covered
    fraction. Rows sum to 1.

    Raises:
        ValueError: when ``n_out > n_in`` (only shrinking is area averaging).
    """
    if n_out > n_in:
        raise ValueError(f"area weights only shrink: {n_in} -> {n_out}")
    scale = n_in / n_out
    w = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        lo, hi = i * scale, (i + 1) * scale
        for j in range(int(np.floor(lo)), int(np.ceil(hi))):
            w[i, j] = min(hi, j + 1) - max(lo, j)
    return (w / scale).astype(np.float32)


def scale_y(screen: np.ndarray) -> np.ndarray:
    """Preprocess one pooled screen (``net_downsample_2x_full_y``: ``nn.Scale``'s forward,
    ``image.rgb2y`` then ``image.scale`` to 84x84, whose shrink averages areas).

    Args:
        screen: float32 (H, W, 3) RGB in [0, 1], normally (210, 160, 3).

    Returns:
        float32 (84 * 84,) = (7056,) luminance in [0, 1], row-major.
    """
    y = screen @ LUMINANCE
    h, w = y.shape
    out = area_weights(h, OUT_SIZE) @ y @ area_weights(w, OUT_SIZE).T
    return np.clip(out, 0.0, 1.0, out=out).reshape(-1)


def to_bytes(state: np.ndarray) -> np.ndarray:
    """Store a preprocessed state as the Lua does: uint8 ``trunc(255 * y)``, same shape."""
    return (state * np.float32(255)).astype(np.uint8)
