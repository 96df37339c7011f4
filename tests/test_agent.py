"""NeuralQLearner on real Pong screens, with a small replay memory."""
import copy

import numpy as np
import pytest
import torch

from dqn_nature import NeuralQLearner, cuda_graph
from dqn_nature.preprocess import scale_y, to_bytes

ACTIONS = [0, 1, 3, 4, 11, 12]
pytestmark = pytest.mark.usefixtures("single_threaded")
SMALL = dict(replay_memory=2000, bufferSize=64, minibatch_size=8, valid_size=32, learn_start=100,
             ep_endt=1000, seed=1)


def make_agent(actions=ACTIONS, **params):
    torch.manual_seed(0)
    return NeuralQLearner(actions, **{**SMALL, **params})


@pytest.fixture(scope="module")
def frames(pong_screens):
    """The Pong screens preprocessed and stored as bytes: uint8 (7056,) each."""
    return [to_bytes(scale_y(s)) for s in pong_screens]


def fill(agent, frames, rewards=(0, 0, 0, -1, 0, 1)):
    """Store one transition per frame, with some non-zero rewards."""
    for i, f in enumerate(frames):
        agent.transitions.add(f, i % agent.n_actions, rewards[i % len(rewards)], False)


def set_constant_q(network, values):
    """Make the network output ``values`` for every input."""
    with torch.no_grad():
        network.fc2.weight.zero_()
        network.fc2.bias.copy_(torch.tensor(values))


@pytest.mark.parametrize("num_steps, ep", [(0, 1.0), (100, 1.0), (600, 0.55), (1100, 0.1), (2000, 0.1)])
def test_epsilon_schedule(num_steps, ep):
    agent = make_agent()
    agent.num_steps = num_steps
    agent.e_greedy(agent.transitions.get_recent())
    assert agent.ep == pytest.approx(ep)
    agent.e_greedy(agent.transitions.get_recent(), testing_ep=0.05)
    assert agent.ep == 0.05


@pytest.mark.parametrize("params, num_steps, lr", [
    (dict(lr=0.01, lr_end=0.001, lr_endt=1000), 50, 0.01),
    (dict(lr=0.01, lr_end=0.001, lr_endt=1000), 600, 0.0055),
    (dict(lr=0.01, lr_end=0.001, lr_endt=1000), 2000, 0.001),
    (dict(), 600, 0.00025),  # lr_end defaults to lr: constant
])
def test_lr_schedule(frames, params, num_steps, lr):
    agent = make_agent(**params)
    fill(agent, frames)
    agent.num_steps = num_steps
    agent.q_learn_minibatch()
    assert agent.lr == pytest.approx(lr)
    assert agent.optimizer.param_groups[0]["lr"] == agent.lr


def test_target_network_copied_when_num_steps_mod_target_q_is_1(pong_screens):
    agent = make_agent(update_freq=1, target_q=5)
    for screen in pong_screens[:120]:
        agent.perceive(0, screen, False)
        same = all(torch.equal(p, q) for p, q in zip(agent.network.parameters(),
                                                     agent.target_network.parameters()))
        # The first update happens in the call that starts at num_steps = learn_start + 1.
        assert same == (agent.num_steps <= 101 or agent.num_steps % 5 == 1), agent.num_steps
    assert agent.num_steps == 120


def test_weights_loaded_before_the_first_step_reach_the_target_at_step_1(pong_screens):
    agent = make_agent(target_q=50)
    set_constant_q(agent.network, [0.5, -0.2, 0.1, 0, 0, 0])  # as pretrained weights loaded into agent.network
    agent.perceive(0, pong_screens[0], False)
    assert agent.num_steps == 1
    assert torch.equal(agent.target_network.fc2.bias, torch.tensor([0.5, -0.2, 0.1, 0, 0, 0]))


def test_perceive_learns_n_replay_times_every_update_freq_steps_after_learn_start(pong_screens):
    agent = make_agent(update_freq=4, n_replay=2)
    calls, learn = [], agent.q_learn_minibatch
    agent.q_learn_minibatch = lambda: (calls.append(agent.num_steps), learn())
    for screen in pong_screens[:120]:
        agent.perceive(0, screen, False)
        agent.perceive(0, screen, False, testing=True)  # never learns
    assert calls == [104, 104, 108, 108, 112, 112, 116, 116]  # num_steps > 100 and % 4 == 0


def test_perceive_acts_before_it_learns(pong_screens):
    """The action of a step is chosen (step 6 of perceive) before that step's minibatch
    update (step 7), on the network as it was when the step began."""
    agent = make_agent(update_freq=1)
    events, learn, act = [], agent.q_learn_minibatch, agent.e_greedy
    agent.q_learn_minibatch = lambda: (events.append(("learn", agent.num_steps)), learn())
    agent.e_greedy = lambda *args: (events.append(("act", agent.num_steps)), act(*args))[1]
    for screen in pong_screens[:103]:
        agent.perceive(0, screen, False)
    assert events[-5:] == [("act", 100), ("act", 101), ("learn", 101), ("act", 102), ("learn", 102)]


def test_perceive_acts_on_the_new_state_which_hides_episodes_before_a_terminal(pong_screens):
    """The action is chosen on the recent frames including the one just perceived; after a
    terminal screen the older frames are zeros (concatFrames), only the new episode shows."""
    agent = make_agent()
    seen, act = [], agent.e_greedy
    agent.e_greedy = lambda state, *args: (seen.append(state.copy()), act(state, *args))[1]
    stored = [to_bytes(scale_y(s)).astype(np.float32) / 255 for s in pong_screens[:7]]
    for i in range(5):
        agent.perceive(0, pong_screens[i], False)
    np.testing.assert_array_equal(seen[-1], stored[1:5])
    assert agent.perceive(0, pong_screens[5], True) is None and len(seen) == 5  # no action chosen
    agent.perceive(0, pong_screens[6], False)
    assert not seen[-1][:3].any()
    np.testing.assert_array_equal(seen[-1][3], stored[6])
    agent.perceive(0, pong_screens[6], False, testing=True)  # the same in testing
    assert not seen[-1][:2].any() and seen[-1][2:].any()


def test_e_greedy_acts_at_random_with_probability_epsilon():
    agent = make_agent()
    set_constant_q(agent.network, [0, 0, 1, 0, 0, 0])
    state = agent.transitions.get_recent()
    assert {agent.e_greedy(state, testing_ep=0) for _ in range(50)} == {2}
    agent.num_steps = 600  # training epsilon 0.55
    n = 2000
    counts = np.bincount([agent.e_greedy(state) for _ in range(n)], minlength=6)
    p = 0.55 / 6 + 0.45 * (np.arange(6) == 2)  # a uniform random action (greedy included), else 2
    assert (abs(counts - n * p) < 5 * np.sqrt(n * p * (1 - p))).all(), counts


@pytest.mark.parametrize("rescale_r, clip_delta, deltas", [
    (True, 1, [0.495, -0.3, 0.395, 1.0]),
    (True, 2, [0.495, -0.3, 0.395, 1.195]),
    (False, 1, [0.995, -0.8, 0.395, 1.0]),
])
def test_get_q_update_by_hand(rescale_r, clip_delta, deltas):
    agent = make_agent(actions=[0, 1, 2], rescale_r=rescale_r, clip_delta=clip_delta)
    set_constant_q(agent.network, [0.5, -0.2, 0.1])
    set_constant_q(agent.target_network, [0.3, 0.5, -1.0])  # max_a target = 0.5
    agent.r_max = 2
    s = np.zeros((4, 4, 7056), np.uint8)
    a, r, term = np.array([0, 1, 2, 1]), np.array([1.0, -1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0, 0.0])
    # delta = r / r_max + 0.99 (1 - term) 0.5 - Q(s, a), clipped to +-clip_delta
    targets, delta, q2_max, _ = agent.get_q_update(s, a, r, s, term)
    np.testing.assert_allclose(delta.numpy(), deltas, atol=1e-6)
    np.testing.assert_allclose(q2_max.numpy(), 0.5, atol=1e-7)
    expected = np.zeros((4, 3), np.float32)
    expected[np.arange(4), a] = deltas
    np.testing.assert_allclose(targets.numpy(), expected, atol=1e-6)


def test_without_target_q_the_online_network_gives_the_targets():
    agent = make_agent(actions=[0, 1, 2], target_q=0)
    set_constant_q(agent.network, [0.5, -0.2, 0.1])
    set_constant_q(agent.target_network, [0.3, 0.9, -1.0])  # unused
    s = np.zeros((2, 4, 7056), np.uint8)
    _, delta, q2_max, _ = agent.get_q_update(s, np.array([0, 1]), np.zeros(2), s, np.zeros(2))
    np.testing.assert_allclose(q2_max.numpy(), 0.5, atol=1e-7)
    np.testing.assert_allclose(delta.numpy(), [0.99 * 0.5 - 0.5, 0.99 * 0.5 + 0.2], atol=1e-6)


def test_get_q_update_discounts_by_the_discount_parameter():
    agent = make_agent(actions=[0, 1, 2], discount=0.5)
    set_constant_q(agent.network, [0.5, -0.2, 0.1])
    set_constant_q(agent.target_network, [0.3, 0.5, -1.0])  # max_a target = 0.5
    s = np.zeros((2, 4, 7056), np.uint8)
    # delta = 0 + 0.5 * 0.5 - Q(s, a): 0.25 - 0.5, 0.25 - 0.1
    _, delta, _, _ = agent.get_q_update(s, np.array([0, 2]), np.zeros(2), s, np.zeros(2))
    np.testing.assert_allclose(delta.numpy(), [-0.25, 0.15], atol=1e-6)


def test_get_q_update_clips_negative_deltas_too():
    agent = make_agent(actions=[0, 1, 2])
    set_constant_q(agent.network, [0.5, -0.2, 0.1])
    set_constant_q(agent.target_network, [0.3, 0.5, -1.0])  # max_a target = 0.5
    s = np.zeros((2, 4, 7056), np.uint8)
    # delta = -1 + 0.99 (1 - term) 0.5 - Q(s, a): -1 - 0.5 = -1.5 clipped to -1; -1 + 0.495 - 0.1 = -0.605
    _, delta, _, _ = agent.get_q_update(s, np.array([0, 2]), np.array([-1.0, -1.0]), s, np.array([1.0, 0.0]))
    np.testing.assert_allclose(delta.numpy(), [-1.0, -0.605], atol=1e-6)


def test_validation_statistics_on_real_frames(frames):
    agent = make_agent()
    fill(agent, frames)
    agent.sample_validation_data()
    with torch.no_grad():  # a target network unlike the online one
        agent.target_network.fc2.bias += torch.tensor([1.0, 0, 0, 0, 0, -1.0])
    s, a, r, s2, term = agent.valid

    def q(net, x):
        return net(torch.from_numpy(x).float().div(255).reshape(-1, 4, 84, 84)).double()

    with torch.no_grad():
        q2_max = q(agent.target_network, s2).max(1).values
        delta = (torch.from_numpy(r).double() + 0.99 * (1 - torch.from_numpy(term).double()) * q2_max
                 - q(agent.network, s).gather(1, torch.from_numpy(a)[:, None])[:, 0]).clamp(-1, 1)
    agent.compute_validation_statistics()
    assert agent.v_avg == pytest.approx(float(q2_max.mean()), rel=1e-5)  # q_max (1) * mean max_a target(s2, a)
    assert agent.tderr_avg == pytest.approx(float(delta.abs().mean()), rel=1e-5)
    assert float(q2_max.max() - q2_max.mean()) > 1e-4  # a mean, not the largest value, is told apart


def test_r_max_is_the_largest_clipped_reward_not_the_largest_magnitude(pong_screens):
    agent = make_agent(min_reward=-5, max_reward=3)
    for reward, screen in zip([-5, 0, 2], pong_screens):
        agent.perceive(reward, screen, False)
    assert agent.r_max == 2  # max(1, -5, 0, 2)


def test_validation_set_is_a_copy_that_buffer_refills_leave_alone(frames):
    agent = make_agent()
    fill(agent, frames)
    agent.sample_validation_data()  # slots 0..31 of the 64-slot prefetch buffer
    valid = copy.deepcopy(agent.valid)
    for _ in range(8):  # 32 + 8 x 8 runs past slot 64: the buffer is refilled
        agent.transitions.sample(agent.minibatch_size)
    assert not np.array_equal(agent.transitions.buf_s[:32], valid[0])
    assert all(np.array_equal(u, v) for u, v in zip(agent.valid, valid))


def test_validation_statistics_by_hand():
    agent = make_agent(actions=[0, 1, 2])
    set_constant_q(agent.network, [0.5, -0.2, 0.1])
    set_constant_q(agent.target_network, [0.3, 0.5, -1.0])
    s = np.zeros((4, 4, 7056), np.uint8)
    a, r, term = np.array([0, 1, 2, 1]), np.array([1.0, -1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0, 0.0])
    agent.valid = (s, a, r, s, term)
    agent.compute_validation_statistics()
    assert agent.v_avg == pytest.approx(0.5)  # q_max (1) * mean max_a target(s2, a)
    assert agent.tderr_avg == pytest.approx((0.995 + 0.8 + 0.395 + 1.0) / 4, abs=1e-6)  # |delta| clipped


def test_report_prints_mean_and_max_absolute_weights_and_gradients_as_nnutils_does():
    agent = make_agent()
    with torch.no_grad():
        for k, layer in enumerate(agent.network.layers()):
            w = torch.tensor([-0.25, 0.75]).repeat(layer.weight.numel() // 2) * (k + 1)
            layer.weight.copy_(w.reshape(layer.weight.shape))  # mean |w| 0.5 (k + 1), max 0.75 (k + 1)
    agent.network.fc2.weight.grad = torch.full_like(agent.network.fc2.weight, -0.125)  # no others yet
    conv, linear = "nn.SpatialConvolution", "nn.Linear"
    assert agent.report().split("\n") == [
        "Weight norms:", f"nn.Sequential: [{conv}: 0.5 {conv}: 1 {conv}: 1.5 {linear}: 2 {linear}: 2.5]",
        "Weight max:", f"nn.Sequential: [{conv}: 0.75 {conv}: 1.5 {conv}: 2.25 {linear}: 3 {linear}: 3.75]",
        "Weight grad norms:", f"nn.Sequential: [{conv}: 0 {conv}: 0 {conv}: 0 {linear}: 0 {linear}: 0.125]",
        "Weight grad max:", f"nn.Sequential: [{conv}: 0 {conv}: 0 {conv}: 0 {linear}: 0 {linear}: 0.125]"]


@pytest.mark.parametrize("updates_before", [0, 1], ids=["first update", "second update"])
def test_q_learn_minibatch_gradient_is_the_sum_over_the_minibatch(frames, updates_before):
    """dw of one update is its own minibatch's: an earlier update's gradient is not added in."""
    agent = make_agent()
    fill(agent, frames)
    t = agent.transitions
    t.fill_buffer()
    for _ in range(updates_before):
        agent.q_learn_minibatch()  # buffer slots 0..7
    n = 8 * updates_before  # the next minibatch is buffer slots n..n+7
    s, a, r, s2, term = (np.array(x[n:n + 8]) for x in (t.buf_s, t.buf_a, t.buf_r, t.buf_s2, t.buf_term))
    assert r.any() and len(set(a)) > 1
    before = copy.deepcopy(agent.network)
    agent.q_learn_minibatch()

    x = torch.from_numpy(s).float().div(255).reshape(8, 4, 84, 84)
    x2 = torch.from_numpy(s2).float().div(255).reshape(8, 4, 84, 84)
    with torch.no_grad():
        q2_max = agent.target_network(x2).max(1).values
    params = list(before.parameters())
    expected = [torch.zeros_like(p) for p in params]
    for i in range(8):
        q = before(x[i:i + 1])[0, a[i]]
        delta = (r[i] + 0.99 * (1 - term[i]) * q2_max[i] - q.detach()).clamp(-1, 1)
        for e, g in zip(expected, torch.autograd.grad(q, params)):
            e += delta * g
    for p, e, old in zip(agent.network.parameters(), expected, params):
        torch.testing.assert_close(p.grad, e, rtol=1e-4, atol=1e-7)
        if not updates_before:  # First RMSProp step: g = 0.05 dw, g2 = 0.05 dw^2, ascent along dw.
            dw = p.grad
            denom = (0.05 * dw ** 2 - (0.05 * dw) ** 2 + 0.01).sqrt()
            torch.testing.assert_close(p.detach(), old.detach() + 0.00025 * dw / denom)


def test_states_become_the_networks_channels_last_input():
    agent = make_agent()
    rng = np.random.default_rng(0)
    stored = rng.integers(0, 256, (3, 4, 7056), dtype=np.uint8)
    for states in (stored, stored.astype(np.float32) / np.float32(255)):  # a minibatch's, get_recent's
        x = agent._to_input(states)
        assert x.dtype == torch.float32 and x.shape == (3, 4, 84, 84)
        assert x.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(x, torch.from_numpy(stored).reshape(3, 4, 84, 84).float() / 255)


def test_bf16_runs_the_networks_under_autocast_and_keeps_float32_weights(frames):
    agent, fp32 = make_agent(precision="bf16"), make_agent()
    states = np.stack([np.stack(frames[i:i + 4]) for i in range(0, 40, 10)])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = agent.network(agent._to_input(states)).float()
    q = agent._greedy_q(states)
    assert torch.equal(q, expected) and not torch.equal(q, fp32._greedy_q(states))
    fill(agent, frames)
    agent.q_learn_minibatch()
    assert not torch.equal(agent._greedy_q(states), q)
    for p in agent.network.parameters():
        assert p.dtype == p.grad.dtype == agent.optimizer.state[p]["g2"].dtype == torch.float32


def test_perceive_stores_transitions_only_when_training(pong_screens):
    agent = make_agent()
    a0 = agent.perceive(0, pong_screens[0], False)
    assert agent.transitions.size() == 0 and agent.num_steps == 1  # nothing before to link
    assert a0 in range(len(ACTIONS))
    agent.perceive(5.0, pong_screens[1], False)
    assert agent.transitions.size() == 1 and agent.num_steps == 2
    np.testing.assert_array_equal(agent.transitions.s[0], to_bytes(scale_y(pong_screens[0])))
    assert (agent.transitions.a[0], agent.transitions.r[0], agent.transitions.t[0]) == (a0, 1.0, False)
    assert agent.r_max == 1  # the reward was clipped before rescaling saw it
    assert agent.perceive(-3.0, pong_screens[2], True) is None
    assert agent.transitions.r[1] == -1.0 and agent.transitions.recent_a[-1] == 0
    agent.perceive(0, pong_screens[3], False)
    assert agent.transitions.t[2]  # the terminal screen's flag
    for screen in pong_screens[4:10]:
        assert agent.perceive(1, screen, False, testing=True, testing_ep=0.05) is not None
        assert agent.ep == 0.05
    assert agent.transitions.size() == 3 and agent.num_steps == 4


def test_reward_clipping_bounds_and_rescaling(pong_screens):
    agent = make_agent(min_reward=-2, max_reward=3)
    for reward, screen in zip([0, 5, -7], pong_screens):
        agent.perceive(reward, screen, False)
    assert list(agent.transitions.r[:2]) == [3, -2] and agent.r_max == 3


@pytest.mark.parametrize("update_freq, buf_ind", [(4, 32), (1, 40)])
def test_validation_set_sampled_at_learn_start_plus_1(pong_screens, update_freq, buf_ind):
    """With update_freq 1 the first update comes in the same call, after the validation set is
    drawn: the set is the buffer's first 32 slots, the minibatch the next 8."""
    agent = make_agent(learn_start=70, update_freq=update_freq)
    for screen in pong_screens[:72]:
        assert agent.valid is None
        agent.perceive(0, screen, False)
    assert agent.num_steps == 72  # sampled in the call that began at num_steps = 71
    s, a, r, s2, term = agent.valid
    assert s.shape == (32, 4, 7056) and s2.shape == (32, 4, 7056) and len(a) == len(r) == len(term) == 32
    t = agent.transitions  # the first 32 slots of a fresh prefetch buffer; minibatches read on
    assert t.buf_ind == buf_ind and all(np.array_equal(u, v[:32]) for u, v in
                                   zip(agent.valid, (t.buf_s, t.buf_a, t.buf_r, t.buf_s2, t.buf_term)))
    valid = copy.deepcopy(agent.valid)
    agent.perceive(0, pong_screens[72], False)
    assert all(np.array_equal(u, v) for u, v in zip(agent.valid, valid))  # kept for the run


def test_greedy_breaks_ties_uniformly():
    agent = make_agent()
    state = agent.transitions.get_recent()
    set_constant_q(agent.network, [0.25] * 6)
    counts = np.bincount([agent.greedy(state) for _ in range(300)], minlength=6)
    assert (counts > 25).all(), counts
    assert agent.bestq == 0.25
    set_constant_q(agent.network, [0.0, 0.0, 0.0, 1.0, 0.0, 1.0 - 1e-6])
    assert {agent.greedy(state) for _ in range(50)} == {3}


@pytest.mark.parametrize("q, actions, bestq", [
    ([0.5, np.nan, 0.75, 0.75, np.nan, 0.0], {2, 3}, 0.75),  # NaN never wins a comparison
    ([np.nan, 1.0, 2.0, 0.0, 0.0, 0.0], {0}, np.nan),  # nothing beats a NaN first value
])
def test_greedy_scans_nan_q_values_as_the_lua_loop_does(q, actions, bestq):
    agent = make_agent()
    state = agent.transitions.get_recent()
    set_constant_q(agent.network, q)
    assert {agent.greedy(state) for _ in range(50)} == actions
    np.testing.assert_equal(agent.bestq, bestq)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision, tf32", [("fp32", False), ("tf32", True)])
def test_cuda_fp32_is_not_tf32(precision, tf32):
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = not tf32
    make_agent(gpu=0, precision=precision)
    assert torch.backends.cudnn.allow_tf32 is tf32 and torch.backends.cuda.matmul.allow_tf32 is tf32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("params", [dict(), dict(lr_end=0.0001, lr_endt=50, rescale_r=1)])
def test_cuda_graphs_give_the_eager_results(frames, monkeypatch, params):
    """Updates and greedy forward passes replayed from CUDA graphs equal eager ones bit for bit,
    with a constant learning rate (captured once) and an annealed one (eager each time)."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    calls = 2 * cuda_graph.WARMUP + 2

    def learn_and_act(agent):
        fill(agent, frames)
        state = agent.transitions.get_recent()
        for step in range(calls):
            agent.num_steps = 101 + step
            agent.q_learn_minibatch()
            action = agent.greedy(state)
        return action, agent.bestq, list(agent.network.parameters())

    replayed = make_agent(gpu=0, **params)
    *choice, weights = learn_and_act(replayed)
    assert (replayed._update_graph.graph is not None) == (not params)
    assert replayed._forward_graph.graph is not None
    monkeypatch.setattr(cuda_graph, "WARMUP", calls + 1)
    eager = make_agent(gpu=0, **params)
    *eager_choice, eager_weights = learn_and_act(eager)
    assert eager._update_graph.graph is None and eager._forward_graph.graph is None
    assert eager_choice == choice
    assert all(torch.equal(a, b) for a, b in zip(weights, eager_weights))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graph_follows_set_state(frames, monkeypatch):
    """After ``set_state`` (new optimiser buffers) replayed updates continue from the state set."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    calls = 2 * cuda_graph.WARMUP + 2

    def learn(agent):
        for _ in range(calls):
            agent.q_learn_minibatch()
        return [p.detach().clone() for p in agent.network.parameters()]

    replayed = make_agent(gpu=0)
    fill(replayed, frames)
    replayed.num_steps = 101
    learn(replayed)
    state = copy.deepcopy(replayed.get_state())
    learn(replayed)
    # Held, so that the new buffers cannot reuse these addresses and hide a stale graph.
    old_buffers = [dict(replayed.optimizer.state[p]) for p in replayed.network.parameters()]
    replayed.set_state(state, replay_restored=True)
    weights = learn(replayed)
    assert replayed._update_graph.graph is not None and old_buffers
    monkeypatch.setattr(cuda_graph, "WARMUP", calls + 1)
    eager = make_agent(gpu=0)
    fill(eager, frames)
    eager.set_state(state, replay_restored=True)
    assert all(torch.equal(a, b) for a, b in zip(weights, learn(eager)))
