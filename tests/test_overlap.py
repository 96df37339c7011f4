"""``--overlap-updates``: updates computed on a second thread give the serial updates' results
bit for bit (real Pong runs), and the worker thread fails and ends cleanly."""
import gc
import threading
import time

import pytest
import torch

from dqn_nature import NeuralQLearner, optim, overlap
from dqn_nature.config import ConfigError, resolve
from test_golden import RUN, record, train

pytestmark = pytest.mark.usefixtures("single_threaded")
SMALL = dict(replay_memory=2000, bufferSize=64, minibatch_size=8, valid_size=32, learn_start=100, seed=1)


def counting(monkeypatch) -> dict:
    """Count the updates started ahead (``start_next``) and those dropped (``_Job.abort``)."""
    counts = dict(ahead=0, dropped=0)
    start_next, abort = overlap.OverlappedUpdates.start_next, overlap._Job.abort

    def counted_start_next(self):
        start_next(self)
        counts["ahead"] += self.job is not None

    def counted_abort(self):
        counts["dropped"] += 1
        abort(self)

    monkeypatch.setattr(overlap.OverlappedUpdates, "start_next", counted_start_next)
    monkeypatch.setattr(overlap._Job, "abort", counted_abort)
    return counts


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_an_overlapped_run_gives_the_serial_runs_histories_and_weights(tmp_path, monkeypatch, precision):
    """The golden test's run (buffer refills, target copies between updates, evaluations):
    the same on every platform, where that test needs a platform's record."""
    serial = record(train(tmp_path / "serial", precision=precision))
    counts = counting(monkeypatch)
    assert record(train(tmp_path / "overlapped", precision=precision, overlap_updates=True)) == serial
    updates = (RUN["steps"] - RUN["learn_start"]) // 4
    assert updates * 0.8 < counts["ahead"] < updates  # none where the next update refills the buffer
    assert counts["dropped"] >= 1  # started before a target copy


def agents_after(screens, changes: dict, **params):
    """A serial and an overlapped agent (same seed) after ``perceive`` on ``screens``, with
    rewards up to 3 (``r_max`` grows); ``changes[i](agent)`` runs on both before screen i."""
    agents = []
    for overlap_updates in (False, True):
        torch.manual_seed(0)
        agent = NeuralQLearner([0, 1, 3, 4, 11, 12], overlap_updates=overlap_updates, max_reward=None,
                               **SMALL, **params)
        for i, screen in enumerate(screens):
            if i in changes:
                changes[i](agent)
            agent.perceive(float(i % 7 == 0) * (1 + i // 60), screen, False)
        agents.append(agent)
    return agents


def assert_same_learning(serial, overlapped):
    assert serial.report() == overlapped.report()  # the last update's gradients too
    for p, q in zip(serial.network.parameters(), overlapped.network.parameters()):
        assert torch.equal(p, q)
        assert all(torch.equal(serial.optimizer.state[p][k], overlapped.optimizer.state[q][k]) for k in ("g", "g2"))
    for p, q in zip(serial.target_network.parameters(), overlapped.target_network.parameters()):
        assert torch.equal(p, q)


def test_updates_started_before_the_weights_or_r_max_changed_are_computed_again(pong_screens, monkeypatch):
    def load_weights(agent):  # between two updates, as a user loading a network would
        with torch.no_grad():
            agent.network.fc2.bias.add_(0.5)

    counts = counting(monkeypatch)
    serial, overlapped = agents_after(pong_screens, {140: load_weights})
    assert_same_learning(serial, overlapped)
    assert serial.r_max == 4 and counts["ahead"] > 10
    assert counts["dropped"] >= 2  # r_max grew (screen 126) and the weights changed while an update was ahead


def test_without_a_target_network_the_overlapped_updates_give_the_serial_ones(pong_screens):
    assert_same_learning(*agents_after(pong_screens, {}, target_q=0))


@pytest.mark.parametrize("update_freq, n_replay", [(1, 1), (2, 2)])
def test_overlapped_updates_at_every_step_or_several_a_step_give_the_serial_ones(pong_screens, monkeypatch,
                                                                                  update_freq, n_replay):
    counts = counting(monkeypatch)
    assert_same_learning(*agents_after(pong_screens, {}, update_freq=update_freq, n_replay=n_replay))
    assert counts["ahead"] > 20


@pytest.mark.parametrize("kernel", [True, False], ids=["C kernel", "torch"])
def test_bf16_with_a_weight_cost_overlapped_gives_the_serial_updates(pong_screens, monkeypatch, kernel):
    monkeypatch.setattr(optim, "_no_kernel", not kernel)
    serial, overlapped = agents_after(pong_screens, {}, precision="bf16", wc=0.01)
    assert_same_learning(serial, overlapped)
    assert serial.network.fc1.weight.grad is not None  # dw - wc w, in float32


def test_an_error_on_the_worker_is_raised_by_perceive(pong_screens, monkeypatch):
    def fail(*args):
        raise RuntimeError("worker failed")

    monkeypatch.setattr(overlap, "forward_saved", fail)
    agent = NeuralQLearner([0, 1, 3], overlap_updates=True, **SMALL)
    with pytest.raises(RuntimeError, match="worker failed"):
        for screen in pong_screens:
            agent.perceive(0, screen, False)


def test_the_worker_ends_with_its_agent(pong_screens):
    before = set(threading.enumerate())
    agent = NeuralQLearner([0, 1, 3], overlap_updates=True, **SMALL)
    (worker,) = [t for t in set(threading.enumerate()) - before if t.name == "dqn-update"]
    for screen in pong_screens[:140]:
        agent.perceive(0, screen, False)
    assert agent._overlap.job is not None  # an update waits for its step
    del agent
    deadline = time.monotonic() + 5
    while worker.is_alive() and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert not worker.is_alive()


def test_overlapped_updates_are_a_cpu_mode_in_fp32_or_bf16():
    with pytest.raises(ValueError, match="a CPU mode, in fp32 or bf16"):
        NeuralQLearner([0, 1], overlap_updates=True, precision="tf32")
    with pytest.raises(ConfigError, match="--overlap-updates is a CPU mode and tf32 a CUDA one"):
        resolve(dict(game="pong", overlap_updates=True, precision="tf32"))
