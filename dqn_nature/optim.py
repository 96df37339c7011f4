"""DQN 3.0's RMSProp variant (ports the update at the end of ``NeuralQLearner:qLearnMinibatch``)."""
from __future__ import annotations

from collections import defaultdict

import torch


class DeepMindRMSProp(torch.optim.Optimizer):
    """``g = 0.95 g + 0.05 dw; g2 = 0.95 g2 + 0.05 dw^2; w += lr * dw / sqrt(g2 - g^2 + 0.01)``.

    ``p.grad`` must hold ``dw``, the *ascent* direction, as the Lua's ``dw``
    (``sum_i delta_i dQ(s_i, a_i)/dw``); the step therefore adds. This is neither
    ``torch.optim.RMSprop`` nor its centered mode: 0.01 sits inside the root.

    A ``torch.optim.Optimizer`` that deliberately skips ``Optimizer.__init__``: that call
    imports torch's compiler stack and sympy, 74 MB of resident memory, a tenth of a full
    replay memory's margin. It sets ``param_groups``, ``state`` and ``defaults`` itself and
    defines ``zero_grad`` and ``step``; the base class's hooks and ``state_dict`` are not
    supported (checkpoints go through ``NeuralQLearner.get_state``).

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
            decay, eps, lr, wc = group["decay"], group["eps"], group["lr"], group["wc"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                dw = p.grad
                if wc:  # in place, as the Lua's dw:add(-wc, w): report() prints the gradient used
                    dw.add_(p, alpha=-wc)
                state = self.state[p]
                if not state:
                    state["g"] = torch.zeros_like(p)
                    state["g2"] = torch.zeros_like(p)
                g, g2 = state["g"], state["g2"]
                denom = self._denom.get(p)
                if denom is None:
                    denom = self._denom[p] = torch.empty_like(g2)
                g.mul_(decay).add_(dw, alpha=1 - decay)
                g2.mul_(decay).addcmul_(dw, dw, value=1 - decay)
                torch.addcmul(g2, g, g, value=-1, out=denom).add_(eps).sqrt_()
                p.addcdiv_(dw, denom, value=lr)
        return loss
