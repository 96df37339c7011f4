"""The training loop of ``train_agent.lua``: its episodes, its evaluations and its clock,
on the real emulator."""
import itertools
import json
import random
import types

import numpy as np
import pytest
import threadpoolctl
import torch

from dqn_nature import train
from dqn_nature.checkpoint import restore_checkpoint, save_checkpoint
from dqn_nature.config import resolve
from dqn_nature.preprocess import scale_y, to_bytes


def test_training_time_is_all_but_the_evaluation_steps(monkeypatch):
    """Lua starts the testing clock after ``newGame()`` (which may play a game out) and stops it
    before ``compute_validation_statistics()``: both count as training time, as does all
    else but the ``eval_steps`` steps themselves. Times are printed truncated (``%d``).

    A virtual clock advances 0.5 s per training step, 1 s per evaluation step, 64 s per
    evaluation ``new_game`` and 1024.75 s per validation pass."""
    config = resolve(dict(game="pong", gpu=-1, steps=300, learn_start=100, eval_freq=100, eval_steps=25,
                          replay_memory=1000, update_freq=1000, buffer_size=64, valid_size=32, threads=1,
                          verbose=0))
    trainer = train.Trainer(config, -1)
    now = [0.0]
    monkeypatch.setattr(train, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def taking(function, training_seconds, evaluation_seconds):
        def timed(*args, **kwargs):
            now[0] += evaluation_seconds if trainer.evaluating else training_seconds
            return function(*args, **kwargs)
        return timed

    trainer.env.step = taking(trainer.env.step, 0.5, 1.0)
    trainer.env.new_game = taking(trainer.env.new_game, 0.0, 64.0)
    trainer.agent.compute_validation_statistics = taking(trainer.agent.compute_validation_statistics, 1024.75, 0)
    evaluations = [e.evaluation for e in trainer.run() if e.evaluation]

    assert trainer.history["time_history"] == [0.0, 100 + 64 + 1024.75, 2 * (64 + 1024.75) + 150]
    assert [(e.step, e.train_time, e.eval_time) for e in evaluations] == [(200, 1188.75, 25.0), (300, 1138.75, 25.0)]
    summary = evaluations[0].summary()
    v_line, blank, steps_line = summary.split("\n")  # as Lua prints: tabs between, numbers in %.14g
    label, v, label2, td, label3, q_max = v_line.split("\t")
    assert (label, label2, label3, q_max, blank) == ("V", "TD error", "Qmax", "1", "")
    for text, value in ((v, evaluations[0].v_avg), (td, evaluations[0].tderr_avg)):
        assert len(text.lstrip("-0.").replace(".", "")) <= 14 and float(text) == pytest.approx(value, rel=1e-13)
    assert steps_line.startswith("Steps: 200 (frames: 800), reward: 0.00, epsilon: 0.05, lr: 0.00025, ")
    assert "training time: 1188s, training rate: 0fps, testing time: 25s, testing rate: 4fps" in summary
    assert "training time: 1138s" in evaluations[1].summary()


def test_a_trainer_sets_the_threads_as_initenv_does():
    """Torch gets ``threads`` and NumPy's BLAS one thread (preprocessing's small products are
    many times slower with BLAS threads spinning beside torch's)."""
    threads = torch.get_num_threads()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        torch.set_num_threads(2)
        train.Trainer(resolve(dict(game="pong", gpu=-1, threads=1, replay_memory=1000)), -1)
        assert torch.get_num_threads() == 1
        assert {p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"} == {1}
    torch.set_num_threads(threads)


def record_calls(trainer):
    """Log each environment call of ``trainer``'s loop as (name, training step, evaluating,
    (reward, terminal, lives before, lives after) for ``step``) in the returned list."""
    env, calls, depth = trainer.env, [], [0]

    def logged(name):
        function = getattr(env, name)

        def call(*args, **kwargs):
            lives = env.ale.lives()
            depth[0] += 1  # next_random_game's own new_game() is not the loop's call
            result = function(*args, **kwargs)
            depth[0] -= 1
            outcome = (result[1], result[2], lives, env.ale.lives()) if name == "step" else None
            if not depth[0]:
                calls.append((name, trainer.step, trainer.evaluating, outcome))
            return result
        setattr(env, name, call)

    for name in ("step", "new_game", "next_random_game"):
        logged(name)
    return calls


@pytest.mark.parametrize("random_starts, restart", [(30, "next_random_game"), (1, "next_random_game"),
                                                   (0, "new_game")])
def test_a_training_terminal_restarts_instead_of_stepping(random_starts, restart):
    """A lost life is terminal in training; the next step perceives it and then restarts
    (nextRandomGame, or newGame without random starts) instead of stepping."""
    config = resolve(dict(game="breakout", gpu=-1, steps=400, learn_start=1000, replay_memory=1000,
                          random_starts=random_starts, threads=1, verbose=0))
    trainer = train.Trainer(config, -1)
    calls = record_calls(trainer)
    for _ in trainer.run():
        pass
    assert [step for _, step, _, _ in calls] == list(range(1, 401))  # one call per step
    terminals = [step for name, step, _, outcome in calls if name == "step" and outcome[1]]
    assert len(terminals) >= 3
    assert all(outcome[3] < outcome[2] for name, _, _, outcome in calls if name == "step" and outcome[1])
    assert [step for name, step, _, _ in calls if name != "step"] == [t + 1 for t in terminals]
    assert {name for name, _, _, _ in calls if name != "step"} == {restart}


def test_evaluation_scores_finished_episodes_and_links_its_last_state_to_training():
    """Ms. Pac-Man, untrained: 900 evaluation steps finish two games and start a third. The
    quirk of SPEC 8: the next training step stores the last evaluation state as a transition."""
    config = resolve(dict(game="ms_pacman", gpu=-1, steps=201, learn_start=100, eval_freq=200, eval_steps=900,
                          replay_memory=1000, update_freq=1000, buffer_size=64, valid_size=32, threads=1,
                          verbose=0, seed=2))
    trainer = train.Trainer(config, -1)
    agent, calls = trainer.agent, record_calls(trainer)
    run = trainer.run()
    (evaluation,) = [e.evaluation for e in itertools.islice(run, 200) if e.evaluation]
    last_state, last_action = agent.last_state.copy(), agent.last_action
    screen, reward, _ = trainer.env.get_state()
    next(run)  # the first training step after the evaluation perceives its last screen, and stores
    np.testing.assert_array_equal(agent.transitions.recent_s[-1], to_bytes(scale_y(screen)))
    assert calls[-2][2] and calls[-1][:3] == ("step", 201, False)  # no environment call between them
    stored = agent.transitions.insert_index - 1  # its last state as a transition
    np.testing.assert_array_equal(agent.transitions.s[stored], last_state)
    assert (agent.transitions.a[stored], agent.transitions.r[stored]) == (last_action, np.clip(reward, -1, 1))

    evaluating = [(name, outcome) for name, _, in_evaluation, outcome in calls if in_evaluation]
    assert evaluating[0] == ("new_game", None)
    steps = [outcome for name, outcome in evaluating if name == "step"]
    assert len(steps) == 900
    rewards, terminals = np.array([s[0] for s in steps]), np.array([s[1] for s in steps])
    ends = np.flatnonzero(terminals)
    assert len(ends) == 2 and rewards[ends[-1] + 1:].sum() > 0  # the unfinished third game scored
    assert any(after < before for _, terminal, before, after in steps if not terminal)  # lives lost, no terminal
    assert [name for name, _ in evaluating[1:] if name != "step"] == ["next_random_game"] * 2
    mean = rewards[:ends[-1] + 1].sum() / 2
    assert (evaluation.reward, evaluation.nepisodes, evaluation.nrewards) == (mean, 2, np.count_nonzero(rewards))
    h = trainer.history
    assert (h["reward_history"], h["episode_counts"], h["reward_counts"]) == ([mean], [2], [evaluation.nrewards])
    assert evaluation.epsilon == 0.05


def test_the_best_network_changes_only_on_a_strictly_better_score():
    """Evaluations of 20 Pong steps finish no game: each scores 0, so the network of the first
    evaluation stays the best although learning changed it since."""
    config = resolve(dict(game="pong", gpu=-1, steps=140, learn_start=100, eval_freq=20, eval_steps=20,
                          replay_memory=1000, update_freq=5, buffer_size=64, valid_size=32, threads=1, verbose=0))
    trainer = train.Trainer(config, -1)
    networks = {e.step: {k: v.clone() for k, v in trainer.agent.network.state_dict().items()}
                for e in trainer.run() if e.evaluation}
    assert list(networks) == [120, 140] and trainer.history["reward_history"] == [0.0, 0.0]
    assert not torch.equal(networks[120]["fc2.bias"], networks[140]["fc2.bias"])
    assert all(torch.equal(trainer.best_network[k], v) for k, v in networks[120].items())


def test_pong_evaluation_counts_lost_points_and_records_its_statistics():
    config = resolve(dict(game="pong", gpu=-1, steps=120, learn_start=100, eval_freq=120, eval_steps=300,
                          replay_memory=1000, update_freq=1000, buffer_size=64, valid_size=32, threads=1, verbose=0))
    trainer = train.Trainer(config, -1)
    calls = record_calls(trainer)
    (evaluation,) = [e.evaluation for e in trainer.run() if e.evaluation]
    rewards = [outcome[0] for name, _, evaluating, outcome in calls if evaluating and name == "step"]
    assert min(rewards) < 0 and evaluation.nrewards == np.count_nonzero(rewards)  # lost points count too
    agent, h = trainer.agent, trainer.history
    assert h["step_history"] == [120] and h["qmax_history"] == [1]  # agent steps, not frames
    assert h["v_history"] == [agent.v_avg] and h["td_history"] == [agent.tderr_avg] and agent.v_avg != agent.tderr_avg
    assert agent.num_steps == 120 and agent.transitions.size() == 119  # the 300 testing steps neither count nor store


@pytest.mark.parametrize("earlier, best", [([1.0, -1.0], False), ([-1.0, -2.0], True)])
def test_the_best_network_is_kept_against_the_best_score_so_far_not_the_last(earlier, best):
    """An evaluation of 20 Pong steps scores 0: better than the last evaluation's -1, but only
    the best network when no earlier evaluation did better."""
    config = resolve(dict(game="pong", gpu=-1, steps=100, learn_start=100, eval_freq=20, eval_steps=20,
                          replay_memory=1000, buffer_size=64, valid_size=32, threads=1, verbose=0))
    trainer = train.Trainer(config, -1)
    kept = trainer.best_network = {"kept": torch.zeros(1)}
    trainer.history["reward_history"] = list(earlier)
    trainer.evaluate()
    assert trainer.history["reward_history"] == earlier + [0.0]
    assert (trainer.best_network is not kept) == best


def test_a_checkpoint_restores_the_trainers_whole_position(tmp_path):
    """Step, training time, histories, best network, the agent's step count (its epsilon) and
    the global random generators come back from ``save_checkpoint`` into a new trainer."""
    config = resolve(dict(game="pong", gpu=-1, steps=130, learn_start=100, eval_freq=120, eval_steps=20,
                          replay_memory=1000, update_freq=5, buffer_size=64, valid_size=32, threads=1, verbose=0,
                          ep_endt=1000))
    trainer = train.Trainer(config, -1)
    for _ in trainer.run():
        pass
    trainer.train_time = 1234.5  # as after hours of training
    torch.manual_seed(7), random.seed(7), np.random.seed(7)
    rngs = torch.get_rng_state(), json.dumps(random.getstate()), np.random.get_state()[1].copy()
    save_checkpoint(str(tmp_path / "run.ckpt"), trainer)
    torch.rand(3), random.random(), np.random.rand()  # the generators move on
    resumed = train.Trainer(config, -1)
    assert restore_checkpoint(str(tmp_path / "run.ckpt"), resumed) is False  # no replay memory in it
    assert (resumed.step, resumed.train_time, resumed.history) == (130, 1234.5, trainer.history)
    assert resumed.agent.num_steps == trainer.agent.num_steps == 130
    assert resumed.agent.train_epsilon() == trainer.agent.train_epsilon() < 1
    assert sorted(resumed.best_network) == sorted(trainer.best_network)
    assert all(torch.equal(resumed.best_network[k], v) for k, v in trainer.best_network.items())
    assert all(torch.equal(resumed.agent.network.state_dict()[k], v)
               for k, v in trainer.agent.network.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rngs[0]) and json.dumps(random.getstate()) == rngs[1]
    np.testing.assert_array_equal(np.random.get_state()[1], rngs[2])
