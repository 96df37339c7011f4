"""DQN 3.0's RMSProp variant (ports the update at the end of ``NeuralQLearner:qLearnMinibatch``)."""
from __future__ import annotations

import functools
import warnings
from collections import defaultdict

import torch

from . import kernels


class DeepMindRMSProp(torch.optim.Optimizer):
    """``g = 0.95 g + 0.05 dw; g2 = 0.95 g2 + 0.05 dw^2; w += lr * dw / sqrt(g2 - g^2 + 0.01)``.

    ``p.grad`` must hold ``dw``, the *ascent* direction, as the Lua's ``dw``
    (``sum_i delta_i dQ(s_i, a_i)/dw``); the step therefore adds. This is neither
    ``torch.optim.RMSprop`` nor its centered mode: 0.01 sits inside the root.

    On the CPU, ``step`` updates each float32 parameter in one pass of a C kernel
    (``kernels.c``'s ``rmsprop``) that gives the bits of torch's eager passes; it is used
    only after a probe at first use shows that, else those passes run.

    A ``torch.optim.Optimizer`` that deliberately skips ``Optimizer.__init__``: that call
    imports torch's compiler stack and sympy, 74 MB of resident memory, a tenth of a full
    replay memory's margin. It sets ``param_groups``, ``state`` and ``defaults`` itself and
    defines ``zero_grad``, ``step`` and, for bf16, ``step_from_bfloat16``; the base class's
    hooks and ``state_dict`` are not supported (checkpoints go through
    ``NeuralQLearner.get_state``).

    Args:
        params: parameters, or parameter groups (dicts with ``params`` and optional options).
        lr: learning rate, per parameter group (the agent anneals it).
        decay: 0.95 in DQN 3.0; momentum terms use ``1 - decay``.
        eps: 0.01 in DQN 3.0, added under the square root.
        wc: weight cost; ``dw -= wc * w``, in ``p.grad``, before the update (0 in DQN 3.0).

    Raises:
        ValueError: a negative learning rate.
    """

    def __init__(self, params, lr: float = 0.00025, decay: float = 0.95, eps: float = 0.01, wc: float = 0.0):
        if lr < 0:
            raise ValueError(f"learning rate must be >= 0, not {lr}")
        defaults = dict(lr=lr, decay=decay, eps=eps, wc=wc)
        params = list(params)
        groups = params if params and isinstance(params[0], dict) else [dict(params=params)]
        self.defaults = defaults
        self.param_groups = [{**defaults, **group, "params": list(group["params"])} for group in groups]
        self.state = defaultdict(dict)
        self._denom = {}  # per parameter, the buffer of sqrt(g2 - g^2 + eps), reused each step
        self._grads = {}  # per parameter, step_from_bfloat16's float32 gradient buffer (with a weight cost)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (or zero) every parameter's gradient."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self, closure=None):
        """Apply one update to every parameter with a gradient. Returns ``closure()``'s value if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._step_group(group, _exact_kernel())
        return loss

    def _step_group(self, group: dict, kernel=None) -> None:
        """``step`` on one parameter group: each dense float32 CPU parameter in one pass of
        ``kernel`` (``_exact_kernel()``, with the bits of the eager passes below) if given, the
        others by those eager passes."""
        for p in group["params"]:
            if p.grad is not None:
                self._step_tensor(group, p, p.grad, kernel)

    @torch.no_grad()
    def step_part(self, parts, rows: slice = slice(None)) -> None:
        """``step`` on some parameters of the first group, each from the gradient given beside
        it, or on ``rows`` (first dimension) of them: the share of an update that one thread
        of ``overlap.OverlappedUpdates`` applies while the other applies the rest. Where a
        bfloat16 copy is given, ``step_from_bfloat16``'s step and refresh instead. The
        arithmetic is elementwise, so the bits are those of ``step`` and
        ``step_from_bfloat16``. No Lua counterpart.

        parts: (parameter, dw, bfloat16 copy or None): dw float32 like the parameter, or
            bfloat16 like the copy.

        Returns: per copied parameter, the float32 gradient ``step_from_bfloat16`` would leave
        in its ``grad`` (``dw - wc w``, or None without a weight cost before the copy's ``dw``).
        """
        group, grads = self.param_groups[0], {}
        for p, dw, copy in parts:
            if copy is None:
                self._step_tensor(group, p, dw, _exact_kernel(), rows)
            else:
                grads[p] = self._step_copy(group, p, copy, dw, rows)
        return grads

    def _step_tensor(self, group: dict, p: torch.Tensor, dw: torch.Tensor, kernel, rows: slice = slice(None)) -> None:
        """One parameter's update (``rows`` of it) from ``dw``, as ``_step_group`` describes."""
        decay, eps, lr, wc = group["decay"], group["eps"], group["lr"], group["wc"]
        state = self._buffers(p)
        w, dw, g, g2 = tensors = (p, dw, state["g"], state["g2"])
        if rows != slice(None):
            w, dw, g, g2 = (t[rows] for t in tensors)
        if kernel and w.is_cpu and w.dtype == dw.dtype == torch.float32 and _one_dense_layout(w, dw, g, g2):
            kernel(w.numel(), w.data_ptr(), g.data_ptr(), g2.data_ptr(), dw.data_ptr(), lr, decay, 1 - decay,
                   eps, wc, kernels.mkl_sqrt(), kernels.VML_MODE)
            for t in (w, dw) if wc else (w,):  # changed in place, as torch's in-place operations record
                torch.autograd.graph.increment_version(t)
            return
        if wc:  # in place, as the Lua's dw:add(-wc, w): report() prints the gradient used
            dw.add_(w, alpha=-wc)
        denom = _scratch(self._denom, p)[rows]
        g.mul_(decay).add_(dw, alpha=1 - decay)
        g2.mul_(decay).addcmul_(dw, dw, value=1 - decay)
        torch.addcmul(g2, g, g, value=-1, out=denom).add_(eps).sqrt_()
        w.addcdiv_(dw, denom, value=lr)

    def _buffers(self, p: torch.Tensor) -> dict:
        """``p``'s RMSProp state, ``g`` and ``g2``, created as zeros at its first step (by
        ``setdefault``: two threads stepping parts of ``p`` get the same buffers)."""
        state = self.state[p]
        for name in ("g", "g2"):
            if name not in state:
                state.setdefault(name, torch.zeros_like(p))
        return state

    @torch.no_grad()
    def step_from_bfloat16(self, copies) -> None:
        """``step`` from the gradients of bfloat16 copies of the parameters, then the copies
        refreshed from the new weights (``--precision bf16`` on the CPU). No Lua counterpart.

        ``copies``: bfloat16 tensors, one per parameter in ``param_groups``' order, whose
        ``grad`` holds ``dw``. Without a weight cost (DQN 3.0's ``wc`` = 0) the copies keep
        those gradients, which are ``dw`` exactly, and the parameters' ``grad`` is dropped
        (None): writing it in float32 would cost 0.3 ms an update for ``NeuralQLearner.report``
        alone. With one, each parameter's ``grad`` holds ``dw - wc w`` in float32, as after
        ``step``, and the copies' are dropped. The arithmetic is ``step``'s on ``dw.float()``,
        in one pass per parameter by a C kernel (``kernels.c``'s ``rmsprop_from_bf16``): 0.8 ms
        for the network on two threads, against 2.5 ms for the casts, ``step``'s eight passes
        and the refresh. Its square root is correctly rounded where torch's is MKL's
        ``vmsSqrt``, and it fuses no multiply-add, so weights can differ from ``step``'s in
        their last bits. Where the kernel cannot be built or used (no C compiler, or a second
        OpenMP runtime beside torch's), warns once (``RuntimeWarning``) and casts, steps and
        copies in torch from then on.
        """
        copies = iter(copies)
        for group in self.param_groups:
            pairs = [(p, c) for p, c in zip(group["params"], copies) if c.grad is not None]
            for p, c in pairs:
                p.grad = self._step_copy(group, p, c, c.grad)
            _keep_one_gradient(pairs, group["wc"])

    def _step_copy(self, group: dict, p: torch.Tensor, copy: torch.Tensor, dw: torch.Tensor,
                   rows: slice = slice(None)):
        """``step_from_bfloat16`` on one parameter and its copy (``rows`` of them) from ``dw``
        (bfloat16): by the C kernel, or, once it has failed, in torch. Returns the float32
        gradient buffer used, with the weight cost (None by the kernel without one)."""
        global _no_kernel
        if not _no_kernel:
            try:
                return self._fused_step(group, p, copy, dw, rows)
            except RuntimeError as e:
                _no_kernel = True
                warnings.warn(f"the C RMSProp kernel is unavailable ({e}): bf16 updates run in torch, slower",
                              RuntimeWarning, stacklevel=3)
        grad = _scratch(self._grads, p)
        grad[rows].copy_(dw[rows])
        self._step_tensor(group, p, grad, None, rows)
        copy[rows].copy_(p[rows])
        return grad

    def _fused_step(self, group: dict, p: torch.Tensor, copy: torch.Tensor, dw: torch.Tensor, rows: slice):
        """``_step_copy`` by the C kernel; the float32 ``dw - wc w`` it wrote, or None."""
        kernel, wc, decay = kernels.library().rmsprop_from_bf16, group["wc"], group["decay"]
        state = self._buffers(p)
        grad = _scratch(self._grads, p) if wc else None
        dw = dw if dw.stride() == p.stride() else torch.empty_like(copy).copy_(dw)
        tensors = [None if t is None else t[rows] for t in (p, copy, state["g"], state["g2"], dw, grad)]
        if (not _one_dense_layout(*(t for t in tensors if t is not None))
                or p.dtype != torch.float32 or copy.dtype != torch.bfloat16 or dw.dtype != torch.bfloat16):
            raise RuntimeError("parameters and copies must be dense float32 and bfloat16 tensors of one layout")
        # keep = 1 - decay as step's alpha: rounded to float32 from the double, not 1 - float32(decay)
        kernel(tensors[0].numel(), *(None if t is None else t.data_ptr() for t in tensors), group["lr"], decay,
               1 - decay, group["eps"], wc)
        for t in (p, copy):  # changed in place, as torch's in-place operations record
            torch.autograd.graph.increment_version(t)
        return grad


def _keep_one_gradient(pairs: list, wc: float) -> None:
    """After ``step_from_bfloat16``: drop the copies' gradients where the parameters hold
    ``dw - wc w`` (a weight cost), else the parameters'."""
    for p, c in pairs:
        if wc:
            c.grad = None
        else:
            p.grad = None


def _one_dense_layout(p: torch.Tensor, *others: torch.Tensor) -> bool:
    """Whether ``p`` is dense (contiguous, or channels-last) and ``others`` share its strides,
    as the C kernels, which walk them as flat arrays, need."""
    dense = p.is_contiguous() or p.dim() == 4 and p.is_contiguous(memory_format=torch.channels_last)
    return dense and all(t.stride() == p.stride() for t in others)


@functools.cache
def _exact_kernel():
    """``kernels.c``'s ``rmsprop``, or None where it cannot be built, where torch's square root
    is not MKL's, or where on a probe its bits differ from ``step``'s eager passes (another
    compiler or torch version may fuse otherwise): float32 results never depend on it."""
    try:
        kernel = kernels.library().rmsprop
    except RuntimeError:
        return None
    if kernels.mkl_sqrt() is None:
        return None
    generator = torch.Generator().manual_seed(0)
    sizes = (1, 31, 33, 70_001)  # vector tails, and a parameter that torch's threads share
    for wc in (0.0, 0.01):
        start = [torch.randn(n, generator=generator) for n in sizes]
        runs = [(DeepMindRMSProp(params, wc=wc), params) for params in ([p.clone() for p in start] for _ in range(2))]
        for _ in range(3):
            grads = [torch.randn(n, generator=generator) * 10 ** (6 * torch.rand(n, generator=generator) - 5)
                     for n in sizes]
            for (optimiser, params), fused in zip(runs, (None, kernel)):
                for p, dw in zip(params, grads):
                    p.grad = dw.clone()
                optimiser._step_group(optimiser.param_groups[0], fused)
        values = [torch.cat([t for p in params for t in (p, p.grad, *optimiser.state[p].values())])
                  for optimiser, params in runs]
        if not torch.equal(*values):
            return None
    return kernel


def _scratch(buffers: dict, p: torch.Tensor) -> torch.Tensor:
    """``buffers[p]``, an uninitialised tensor like ``p`` made at first use and reused after."""
    buffer = buffers.get(p)
    if buffer is None:  # setdefault: two threads stepping parts of p get one buffer
        buffer = buffers.setdefault(p, torch.empty_like(p))
    return buffer


_no_kernel = False  # set once the C kernel has failed in this process
