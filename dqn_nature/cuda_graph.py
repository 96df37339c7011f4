"""Replaying a function's CUDA kernels as one CUDA graph (no counterpart in DQN 3.0).

On a GPU, the agent's action forward pass and minibatch update are little GPU work behind
tens to hundreds of kernel launches from Python, each costing the CPU more than the GPU; a
captured graph launches them all at once, with the eager call's kernels and arguments: the same results.
"""
from __future__ import annotations

from typing import Callable, Hashable

import numpy as np
import torch

WARMUP = 3  # eager calls with the same key before capture (CUDA's lazy set-up happens outside it)


class CudaGraph:
    """``fn(*tensors)`` on static CUDA input tensors, captured once and replayed.

    ``graph(key, *arrays)`` copies the NumPy ``arrays`` through pinned host buffers into the static
    inputs without waiting for the copy, and returns ``fn``'s output (CUDA tensors, overwritten by the
    next call). Buffers and inputs take the first call's shapes and dtypes; later calls must pass the
    same (another shape that broadcasts is not detected). Python scalars ``fn`` reads from elsewhere
    (a learning rate) are frozen into the graph, so the caller passes them as ``key``: a call with a
    new key runs eagerly, and the graph is captured again once the key has held for ``WARMUP`` calls.
    ``reset()`` drops the graph, for when tensors ``fn`` uses in place (optimiser state) are replaced.
    ``fn`` is a function of the static input tensors whose CUDA work is captured.
    """

    def __init__(self, fn: Callable, device: torch.device):
        self.fn, self.device = fn, device
        self.stream = torch.cuda.Stream(device)
        self.host = self.inputs = self.output = self.graph = self.key = None
        self.copied = torch.cuda.Event()  # recorded after the last call's copies to the GPU
        self.calls = 0

    def reset(self) -> None:
        """Drop the captured graph; the next ``WARMUP`` calls are eager again."""
        self.graph, self.calls = None, 0

    def __call__(self, key: Hashable, *arrays: np.ndarray):
        if self.inputs is None:
            pinned = [torch.from_numpy(np.array(x)).pin_memory() for x in arrays]
            self.host = [(t, t.numpy()) for t in pinned]
            self.inputs = [torch.empty_like(t, device=self.device) for t in pinned]
        main = torch.cuda.current_stream(self.device)
        self.copied.synchronize()  # the pinned buffers are free once read
        for (pinned, view), t, x in zip(self.host, self.inputs, arrays):
            view[...] = x
            t.copy_(pinned, non_blocking=True)
        self.copied.record(main)
        if key != self.key:
            self.key = key
            self.reset()
        if self.graph is None:
            # Eager and capture run on a side stream, as CUDA graph capture requires.
            self.stream.wait_stream(main)
            if self.calls < WARMUP:
                self.calls += 1
                with torch.cuda.stream(self.stream):
                    self.output = self.fn(*self.inputs)
                main.wait_stream(self.stream)
                return self.output
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=self.stream):
                self.output = self.fn(*self.inputs)
        self.graph.replay()
        return self.output
