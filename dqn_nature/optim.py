"""DQN 3.0's RMSProp variant (ports the update at the end of ``NeuralQLearner:qLearnMinibatch``)."""
from __future__ import annotations

import torch


class DeepMindRMSProp(torch.optim.Optimizer):
    """``g = 0.95 g + 0.05 dw; g2 = 0.95 g2 + 0.05 dw^2; w += lr * dw / sqrt(g2 - g^2 + 0.01)``.

    ``p.grad`` must hold ``dw``, the *ascent* direction, as the Lua's ``dw``
    (``sum_i delta_i dQ(s_i, a_i)/dw``); the step therefore adds. This is neither
    ``torch.optim.RMSprop`` nor its centered mode: 0.01 sits inside the root. The state of a
    parameter is ``g`` and ``g2``, tensors like it, zeros before its first step.

    Args:
        params: parameters, or parameter groups (dicts with ``params`` and optional options).
        lr: learning rate, per parameter group (the agent anneals it).
        decay: 0.95 in DQN 3.0; the new gradient's weight is ``1 - decay``.
        eps: 0.01 in DQN 3.0, added under the square root.
        wc: weight cost; ``dw -= wc * w``, in ``p.grad``, before the update (0 in DQN 3.0).

    Raises:
        ValueError: a negative learning rate.
    """

    def __init__(self, params, lr: float = 0.00025, decay: float = 0.95, eps: float = 0.01, wc: float = 0.0):
        if lr < 0:
            raise ValueError(f"learning rate must be >= 0, not {lr}")
        super().__init__(params, dict(lr=lr, decay=decay, eps=eps, wc=wc))

    @torch.no_grad()
    def step(self, closure=None):
        """Update every parameter that has a gradient. Returns ``closure()``'s value if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            decay, eps, lr, wc = group["decay"], group["eps"], group["lr"], group["wc"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                dw, state = w.grad, self.state[w]
                if not state:
                    state["g"], state["g2"] = torch.zeros_like(w), torch.zeros_like(w)
                g, g2 = state["g"], state["g2"]
                if wc:  # in place, as the Lua's dw:add(-wc, w): report() prints the gradient used
                    dw.add_(w, alpha=-wc)
                g.mul_(decay).add_(dw, alpha=1 - decay)
                g2.mul_(decay).addcmul_(dw, dw, value=1 - decay)
                denom = torch.addcmul(g2, g, g, value=-1).add_(eps).sqrt_()
                w.addcdiv_(dw, denom, value=lr)
        return loss
