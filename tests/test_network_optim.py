"""convnet_atari3 and DeepMindRMSProp."""
import copy
import math

import pytest
import torch

from dqn_nature.convnet import convnet_atari3
from dqn_nature.optim import DeepMindRMSProp

pytestmark = pytest.mark.usefixtures("single_threaded")


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return convnet_atari3(6)


def test_output_shape(net):
    x = torch.rand(5, 4, 84, 84)
    q = net(x)
    assert q.shape == (5, 6) and q.dtype == torch.float32
    torch.testing.assert_close(net(x.reshape(5, 4 * 7056)), q)  # flat states too


def test_parameter_count(net):
    # conv1 32*4*64+32, conv2 64*32*16+64, conv3 64*64*9+64, fc1 3136*512+512, fc2 512*6+6
    assert sum(p.numel() for p in net.parameters()) == 1_687_206
    assert sum(p.numel() for p in convnet_atari3(18).parameters()) == 1_687_206 + 12 * 513


def test_conv1_padding_1(net):
    assert net.conv1.padding == (1, 1) and net.conv1.stride == (4, 4)
    # With padding 1 the 20 windows of 8 at stride 4 cover input rows/columns -1..82: 83 is unseen.
    x = torch.rand(1, 4, 84, 84)
    q = net(x)
    for changed in (x.clone().index_fill_(2, torch.tensor([83]), 1.0),
                    x.clone().index_fill_(3, torch.tensor([83]), 1.0)):
        torch.testing.assert_close(net(changed), q, rtol=0, atol=0)
    assert not torch.equal(net(x.clone().index_fill_(2, torch.tensor([0]), 1.0)), q)


def test_init_bounds(net):
    for layer in net.layers():
        bound = 1 / math.sqrt(layer.weight[0].numel())
        assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound
        assert layer.weight.abs().max() > 0.9 * bound  # uniform over the whole range
        assert layer.bias.abs().max() > 0.5 * bound  # 6 biases: P(all within half the range) = 1/64
    assert net.conv1.weight[0].numel() == 4 * 8 * 8 and net.fc1.weight[0].numel() == 3136


def test_init_is_uniform_and_centred(net):
    # fc1's 1.6M weights: uniform in +-bound has mean 0, mean |w| = bound / 2 and half of them
    # within bound / 2 (a normal or one-sided distribution misses at least one of these).
    w = net.fc1.weight.detach().double()
    bound = 1 / math.sqrt(3136)
    assert abs(float(w.mean())) < 0.01 * bound
    assert float(w.abs().mean()) == pytest.approx(bound / 2, rel=0.01)
    assert float((w.abs() < bound / 2).double().mean()) == pytest.approx(0.5, abs=0.01)
    assert float((net.fc1.bias < 0).double().mean()) == pytest.approx(0.5, abs=0.1)  # 512 biases


def test_forward_is_the_layers_with_relus_between(net):
    """The layers in order, ReLU after each but the last, the flattening in (channel, row,
    column) order as Torch7's nn.Reshape of a (64, 7, 7) tensor."""
    functional = torch.nn.functional
    x = torch.rand(3, 4, 84, 84)
    h = functional.relu(functional.conv2d(x, net.conv1.weight, net.conv1.bias, stride=4, padding=1))
    h = functional.relu(functional.conv2d(h, net.conv2.weight, net.conv2.bias, stride=2))
    h = functional.relu(functional.conv2d(h, net.conv3.weight, net.conv3.bias))
    assert h.shape == (3, 64, 7, 7)
    h = functional.relu(functional.linear(h.reshape(3, 3136), net.fc1.weight, net.fc1.bias))
    expected = functional.linear(h, net.fc2.weight, net.fc2.bias)
    torch.testing.assert_close(net(x), expected)


def test_rmsprop_two_steps_by_hand():
    w = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True)
    opt = DeepMindRMSProp([w], lr=0.1)
    w.grad = torch.tensor([0.1, -0.2, 0.0], dtype=torch.float64)
    opt.step()
    # g = 0.05 dw, g2 = 0.05 dw^2, w += lr dw / sqrt(g2 - g^2 + 0.01)
    torch.testing.assert_close(opt.state[w]["g"], torch.tensor([0.005, -0.01, 0.0], dtype=torch.float64))
    torch.testing.assert_close(opt.state[w]["g2"], torch.tensor([0.0005, 0.002, 0.0], dtype=torch.float64))
    w1 = [1 + 0.01 / math.sqrt(0.010475), -2 - 0.02 / math.sqrt(0.0119), 0.5]
    torch.testing.assert_close(w.detach(), torch.tensor(w1, dtype=torch.float64))

    w.grad = torch.tensor([0.3, 0.1, -0.4], dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(opt.state[w]["g"], torch.tensor([0.01975, -0.0045, -0.02], dtype=torch.float64))
    torch.testing.assert_close(opt.state[w]["g2"], torch.tensor([0.004975, 0.0024, 0.008], dtype=torch.float64))
    w2 = [w1[0] + 0.03 / math.sqrt(0.0145849375), w1[1] + 0.01 / math.sqrt(0.01237975),
          0.5 - 0.04 / math.sqrt(0.0176)]
    torch.testing.assert_close(w.detach(), torch.tensor(w2, dtype=torch.float64))


def test_rmsprop_steps_at_each_groups_current_lr():
    # The agent anneals the learning rate by setting param_groups[...]["lr"] before each update.
    w, v = (torch.tensor([1.0], dtype=torch.float64, requires_grad=True) for _ in range(2))
    opt = DeepMindRMSProp([dict(params=[w]), dict(params=[v], lr=0.4)], lr=0.1)
    opt.param_groups[0]["lr"] = 0.2
    w.grad = torch.tensor([0.1], dtype=torch.float64)
    v.grad = torch.tensor([0.1], dtype=torch.float64)
    opt.step()
    step = 0.1 / math.sqrt(0.0005 - 0.000025 + 0.01)  # dw / sqrt(g2 - g^2 + 0.01)
    torch.testing.assert_close(w.detach(), torch.tensor([1 + 0.2 * step], dtype=torch.float64))
    torch.testing.assert_close(v.detach(), torch.tensor([1 + 0.4 * step], dtype=torch.float64))


def test_rmsprop_weight_cost():
    w = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    opt = DeepMindRMSProp([w], lr=0.1, wc=0.5)
    w.grad = torch.tensor([0.1, 0.1], dtype=torch.float64)
    opt.step()
    # dw = grad - wc * w = [-0.4, 1.1]
    expected = [1 - 0.04 / math.sqrt(0.008 - 0.0004 + 0.01), -2 + 0.11 / math.sqrt(0.0605 - 0.003025 + 0.01)]
    torch.testing.assert_close(w.detach(), torch.tensor(expected, dtype=torch.float64))
    torch.testing.assert_close(w.grad, torch.tensor([-0.4, 1.1], dtype=torch.float64))  # the Lua's dw, in place


def test_rmsprop_skips_parameters_without_gradient():
    w = torch.ones(2, requires_grad=True)
    DeepMindRMSProp([w]).step()
    assert torch.equal(w.detach(), torch.ones(2))


def test_rmsprop_state_dict_round_trip():
    # The usual calls save and restore g and g2 and the learning rate; steps then continue
    # exactly as the optimiser saved would have.
    torch.manual_seed(0)
    net = convnet_atari3(6).to(memory_format=torch.channels_last)
    opt = DeepMindRMSProp(net.parameters(), lr=0.001)
    grads = [[torch.randn_like(p) for p in net.parameters()] for _ in range(3)]

    def step(params, optimiser, dws):
        for p, dw in zip(params, dws):
            p.grad = dw.clone()
        optimiser.step()

    step(list(net.parameters()), opt, grads[0])
    saved = copy.deepcopy(opt.state_dict())
    twin = copy.deepcopy(net)
    restored = DeepMindRMSProp(twin.parameters())
    restored.load_state_dict(saved)
    assert restored.param_groups[0]["lr"] == 0.001
    for dws in grads[1:]:
        step(list(net.parameters()), opt, dws)
        step(list(twin.parameters()), restored, dws)
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.equal(p, q)
        assert all(torch.equal(opt.state[p][k], restored.state[q][k]) for k in ("g", "g2"))
