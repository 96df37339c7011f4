"""The training loop's clock, as ``train_agent.lua`` keeps it."""
import types

import threadpoolctl
import torch

from dqn_nature import train
from dqn_nature.config import resolve


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
