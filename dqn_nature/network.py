"""The Nature DQN network (ports ``dqn/convnet_atari3.lua`` and ``dqn/convnet.lua``)."""
from __future__ import annotations

import math

import torch
from torch import nn

INPUT_SIDE = 84


class ConvNetAtari3(nn.Module):
    """Conv 32x8x8/4 pad 1, conv 64x4x4/2, conv 64x3x3/1, linear 512, linear n_actions; ReLU between.

    Maps float (N, hist_len * ncols, 84, 84) (or (N, hist_len * ncols * 7056)) in [0, 1]
    to Q-values float (N, n_actions). Weights and biases start uniform in
    ±1/sqrt(fan_in), as Torch7's ``reset()``. Ports the ``nn.Sequential`` that ``convnet.lua``
    builds from ``convnet_atari3.lua``'s arguments.
    """

    def __init__(self, n_actions: int, hist_len: int = 4, ncols: int = 1):
        super().__init__()
        self.n_actions = n_actions
        self.in_channels = hist_len * ncols
        self.conv1 = nn.Conv2d(self.in_channels, 32, 8, stride=4, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 4, stride=2)
        self.conv3 = nn.Conv2d(64, 64, 3, stride=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 512)
        self.fc2 = nn.Linear(512, n_actions)
        for layer in self.layers():
            bound = 1.0 / math.sqrt(layer.weight[0].numel())
            nn.init.uniform_(layer.weight, -bound, bound)
            nn.init.uniform_(layer.bias, -bound, bound)

    def layers(self) -> list[nn.Module]:
        """The five weighted layers, input first (as Torch7's ``findModules``)."""
        return [self.conv1, self.conv2, self.conv3, self.fc1, self.fc2]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The convolutional trunk: (N, C, 84, 84) -> float (N, 3136)."""
        x = x.reshape(-1, self.in_channels, INPUT_SIDE, INPUT_SIDE)
        x = torch.relu_(self.conv1(x))
        x = torch.relu_(self.conv2(x))
        return torch.relu_(self.conv3(x)).flatten(1)

    def head(self, features: torch.Tensor) -> torch.Tensor:
        """The linear layers: float (N, 3136) -> Q-values float (N, n_actions)."""
        return self.fc2(torch.relu_(self.fc1(features)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """float (N, C, 84, 84) in [0, 1] -> Q-values (N, n_actions) (the Lua ``network:forward``)."""
        return self.head(self.features(x))


class PackedInference:
    """Forward passes without gradient of a bfloat16 channels-last ``ConvNetAtari3`` through
    oneDNN directly (``--precision bf16`` on the CPU). No Lua counterpart.

    ``F.conv2d`` reorders a convolution's weights into oneDNN's blocked layout on every call;
    here they are reordered once per batch size and kept until ``clear()``, which the owner
    calls whenever the model's weights change. ReLUs run inside the convolutions, and a single
    state goes through fc1 as a matrix-vector product. The values equal the model's own
    (``features``, ``head``, ``forward``) bit for bit. A state costs about 0.30 ms against
    0.43 ms (the agent's action selection 0.55 against 0.71 ms on an AMX Xeon); a minibatch's
    trunk 0.15 ms less alone, no measurable gain within an update. Where oneDNN has no
    bfloat16 convolutions (``onednn_bf16``), the convolutions are the model's own.

    Args:
        model: the network, bfloat16 parameters in channels-last layout.
    """

    def __init__(self, model: ConvNetAtari3):
        self.model = model
        self._weights = {}  # batch size -> the three reordered convolution weights
        self._onednn = onednn_bf16()

    def clear(self) -> None:
        """Forget the reordered weights (after the model's weights changed)."""
        self._weights.clear()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """bfloat16 (N, C, 84, 84) channels-last -> (N, 3136), as ``ConvNetAtari3.features``."""
        if not self._onednn:
            return self.model.features(x)
        weights = self._weights.setdefault(len(x), [])
        for i, conv in enumerate((self.model.conv1, self.model.conv2, self.model.conv3)):
            if len(weights) == i:  # reordered for this input's shape
                weights.append(torch.ops.mkldnn._reorder_convolution_weight(
                    conv.weight.detach(), conv.padding, conv.stride, conv.dilation, conv.groups, x.shape))
            x = torch.ops.mkldnn._convolution_pointwise(x, weights[i], conv.bias, conv.padding, conv.stride,
                                                        conv.dilation, conv.groups, "relu", [], "")
        return x.flatten(1)

    def head(self, features: torch.Tensor) -> torch.Tensor:
        """(N, 3136) -> Q-values (N, n_actions), as ``ConvNetAtari3.head``."""
        fc1, fc2 = self.model.fc1, self.model.fc2
        if len(features) != 1:
            return self.model.head(features)
        # A one-row matrix product in bfloat16 takes oneDNN's general path, 1.7x slower than this.
        hidden = torch.relu_(torch.addmv(fc1.bias, fc1.weight, features[0]))
        return torch.addmv(fc2.bias, fc2.weight, hidden)[None]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """bfloat16 (N, C, 84, 84) channels-last -> Q-values (N, n_actions), as ``forward``."""
        return self.head(self.features(x))


def onednn_bf16() -> bool:
    """Whether this torch and CPU run bfloat16 convolutions in oneDNN (AVX-512 or AMX), the
    private operators ``PackedInference`` calls included. No Lua counterpart."""
    try:
        return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    except (AttributeError, RuntimeError):  # a torch without these operators
        return False


def convnet_atari3(n_actions: int, hist_len: int = 4, ncols: int = 1) -> ConvNetAtari3:
    """Build the ``convnet_atari3`` network for ``n_actions`` actions (1,687,206 parameters for 6); the
    function that ``convnet_atari3.lua`` returns."""
    return ConvNetAtari3(n_actions, hist_len, ncols)
