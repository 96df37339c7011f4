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


def convnet_atari3(n_actions: int, hist_len: int = 4, ncols: int = 1) -> ConvNetAtari3:
    """Build the ``convnet_atari3`` network for ``n_actions`` actions (1,687,206 parameters for 6); the
    function that ``convnet_atari3.lua`` returns."""
    return ConvNetAtari3(n_actions, hist_len, ncols)
