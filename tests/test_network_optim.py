"""convnet_atari3 and DeepMindRMSProp."""
import copy
import ctypes
import math
import warnings

import numpy as np
import pytest
import torch

from dqn_nature import kernels, optim
from dqn_nature.network import PackedInference, convnet_atari3, onednn_bf16
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


@pytest.mark.skipif(not onednn_bf16(), reason="PackedInference's convolutions run in oneDNN")
def test_packed_inference_equals_the_bfloat16_module(net):
    model = copy.deepcopy(net).to(torch.bfloat16).to(memory_format=torch.channels_last)
    packed = PackedInference(model)
    x = torch.rand(5, 4, 84, 84).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        for batch in (x[:1], x[1:], x[:1]):  # one state (fc1 as a matrix-vector product), several, one again
            assert torch.equal(packed(batch), model(batch))
        assert sorted(packed._weights) == [1, 4]
        for p in model.parameters():
            p.mul_(1.5)
        stale = packed(x[:1])
        packed.clear()  # the owner's duty after the weights changed
        assert not torch.equal(stale, model(x[:1]))
        assert torch.equal(packed(x[:1]), model(x[:1]))


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


def test_deepmind_rmsprop_is_a_torch_optimizer_without_the_compiler_import():
    import subprocess
    import sys

    code = ("import sys, torch; from dqn_nature.optim import DeepMindRMSProp; "
            "o = DeepMindRMSProp(torch.nn.Linear(2, 2).parameters()); o.zero_grad(); "
            "print(isinstance(o, torch.optim.Optimizer), 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]


@pytest.mark.needs_c_compiler
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("wc", [0.0, 0.01])
def test_float32_rmsprop_by_the_kernel_has_the_bits_of_torchs_passes(monkeypatch, threads, wc):
    # step() runs each parameter through kernels.c's rmsprop where it passed its probe against
    # torch's eager passes (it does here: torch's vector loops fuse as the kernel does, and its
    # square root is MKL's). Over three steps of the network's own parameters (a channels-last
    # convolution weight, fc1's 1.6 million, biases of 6 and 32), on one thread and two, the
    # weights, the gradients (dw - wc w in place) and g, g2 equal the eager passes' bit for bit.
    fused = optim._exact_kernel
    assert fused() is not None
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nets = [convnet_atari3(6).to(memory_format=torch.channels_last) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    opts = [DeepMindRMSProp(net.parameters(), lr=0.00025, wc=wc) for net in nets]
    for _ in range(3):
        grads = [torch.randn_like(p) * 10 ** (6 * torch.rand_like(p) - 5) for p in nets[0].parameters()]
        for net, opt, kernel in zip(nets, opts, (fused, lambda: None)):
            for p, dw in zip(net.parameters(), grads):
                p.grad = dw.clone()
            monkeypatch.setattr(optim, "_exact_kernel", kernel)
            opt.step()
    for (p, q), (a, b) in zip(zip(*(net.parameters() for net in nets)), zip(*(opt.state.values() for opt in opts))):
        assert p.stride() == q.stride()
        for x, y in [(p, q), (p.grad, q.grad), (a["g"], b["g"]), (a["g2"], b["g2"])]:
            assert torch.equal(x, y)


VML_SQRT = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def one_ulp_above(vml_sqrt: int):
    """A square root with the signature of MKL's ``vmsSqrt`` (at address ``vml_sqrt``) whose
    every result is one ulp above that function's: roots that surely differ from torch's."""
    mkl = VML_SQRT(vml_sqrt)

    @VML_SQRT
    def root(n, src, dst, mode):
        mkl(n, src, dst, mode)
        out = np.ctypeslib.as_array((ctypes.c_float * n).from_address(dst))
        np.nextafter(out, np.float32(np.inf), out=out)

    return root


@pytest.mark.needs_c_compiler
@pytest.mark.parametrize("change", ["no MKL square root", "another square root"])
def test_float32_rmsprop_kernel_is_refused_unless_it_has_torchs_bits(monkeypatch, change):
    # Without MKL's vmsSqrt, or with a square root whose bits differ from torch's, the kernel is
    # not used: its probe against the eager passes fails, and step() runs those passes. The
    # other root is MKL's one ulp up, not VML's low-accuracy mode: on some CPUs (AMD's, where
    # MKL takes its generic code paths) that mode gives the high-accuracy mode's bits.
    if change == "no MKL square root":
        monkeypatch.setattr(kernels, "mkl_sqrt", lambda: None)
    else:
        root = one_ulp_above(kernels.mkl_sqrt())
        monkeypatch.setattr(kernels, "mkl_sqrt", lambda: ctypes.cast(root, ctypes.c_void_p).value)
    optim._exact_kernel.cache_clear()
    try:
        assert optim._exact_kernel() is None
        torch.manual_seed(0)
        w = torch.randn(5000, requires_grad=True)
        start, dw = w.detach().clone(), torch.randn(5000)
        w.grad = dw.clone()
        DeepMindRMSProp([w], lr=0.1).step()  # from g = g2 = 0: g = 0.05 dw, g2 = 0.05 dw^2
        expected = start + 0.1 * dw / torch.sqrt(0.05 * dw * dw - (0.05 * dw) ** 2 + 0.01)
        torch.testing.assert_close(w.detach(), expected)
    finally:
        monkeypatch.undo()
        optim._exact_kernel.cache_clear()
    assert optim._exact_kernel() is not None


def bf16_copies(params):
    """bfloat16 copies of ``params`` with gradients set: the agent's bf16 mode on the CPU."""
    copies = [p.detach().to(torch.bfloat16) for p in params]
    for c in copies:
        c.grad = (torch.randn(c.shape) * 0.1).to(torch.bfloat16)
    return copies


@pytest.mark.needs_c_compiler
@pytest.mark.parametrize("wc", [0.0, 0.01])
def test_rmsprop_from_bfloat16_gradients_by_the_kernel_and_by_torch(monkeypatch, wc):
    # The C kernel's update against torch's (casts, step, copies) over two steps at different
    # learning rates, without and with a weight cost: equal up to rounding (the kernel rounds
    # its square roots correctly and fuses no multiply-add). dw stays in the copies without a
    # weight cost, else dw - wc w goes to the parameters' grad. The first shape is a
    # channels-last convolution weight, as the agent's.
    torch.manual_seed(0)
    shapes = [(32, 4, 8, 8), (32,), (6, 512)]
    params = {mode: [torch.randn(s).contiguous(memory_format=torch.channels_last if len(s) == 4 else
                                               torch.contiguous_format).requires_grad_() for s in shapes]
              for mode in ("kernel", "eager")}
    with torch.no_grad():
        for p, q in zip(*params.values()):
            q.copy_(p)
    opts = {mode: DeepMindRMSProp(ps, wc=wc) for mode, ps in params.items()}
    for lr in (0.1, 0.3):
        grads = bf16_copies(params["eager"])
        for mode, opt in opts.items():
            opt.param_groups[0]["lr"] = lr
            copies = [c.detach().clone() for c in grads]
            for c, g in zip(copies, grads):
                c.grad = g.grad.clone()
            monkeypatch.setattr(optim, "_no_kernel", mode == "eager")
            opt.step_from_bfloat16(copies)
            assert optim._no_kernel == (mode == "eager")  # the kernel did not fail
            assert all(torch.equal(c, p.detach().to(torch.bfloat16)) for c, p in zip(copies, params[mode]))
            if wc:
                assert all(c.grad is None and p.grad.dtype == torch.float32 for c, p in zip(copies, params[mode]))
            else:
                assert all(p.grad is None for p in params[mode])
                assert all(torch.equal(c.grad, g.grad) for c, g in zip(copies, grads))
        for p, q in zip(*params.values()):
            pairs = [(p, q)] + [(opts["kernel"].state[p][k], opts["eager"].state[q][k]) for k in ("g", "g2")]
            for x, y in pairs + ([(p.grad, q.grad)] if wc else []):
                torch.testing.assert_close(x.detach(), y.detach(), rtol=1e-6, atol=1e-7)


def test_rmsprop_from_bfloat16_gradients_falls_back_when_the_kernel_fails(monkeypatch, no_c_kernels):
    monkeypatch.setattr(optim, "_no_kernel", False)
    torch.manual_seed(0)
    w = torch.randn(3, 5, requires_grad=True)
    reference = w.detach().clone().requires_grad_()
    opt, ref_opt = DeepMindRMSProp([w], lr=0.1), DeepMindRMSProp([reference], lr=0.1)
    for i in range(2):
        copies = bf16_copies([w])
        reference.grad = copies[0].grad.float()
        ref_opt.step()
        if i == 0:
            message = r"^the C RMSProp kernel is unavailable \(no C compiler\): bf16 updates run in torch, slower$"
            with pytest.warns(RuntimeWarning, match=message):
                opt.step_from_bfloat16(copies)
        else:  # once only
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                opt.step_from_bfloat16(copies)
        assert torch.equal(w.detach(), reference.detach()) and w.grad is None  # no weight cost: dw stays
        assert torch.equal(copies[0], w.detach().to(torch.bfloat16)) and torch.equal(copies[0].grad.float(),
                                                                                     reference.grad)
    assert optim._no_kernel
