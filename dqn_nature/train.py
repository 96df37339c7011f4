"""The training loop (ports ``dqn/train_agent.lua`` and the set-up of ``initenv.lua``).

``Trainer.run()`` yields one ``Event`` per agent step, so that progress, logging and saving
observe the loop instead of living in it.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import time
from typing import Iterator

import numpy as np
import threadpoolctl
import torch

from . import __version__
from .config import TESTING_EP, Config
from .environment import GameEnvironment
from .history import HISTORY_FIELDS, HistoryError, save_history
from .network_files import LABELS, load_network, network_misfit, save_network_params
from .neural_q_learner import NeuralQLearner


@dataclasses.dataclass
class Evaluation:
    """One evaluation, as ``train_agent.lua`` records and prints it: ``step`` in agent steps,
    ``frames`` = step x actrep; ``reward``: the mean over finished episodes (0 when none finished);
    ``epsilon``: the agent's after evaluating, the testing 0.05; times in seconds, ``train_time``
    since the previous evaluation; rates in frames/s.
    """

    step: int
    frames: int
    reward: float
    nrewards: int
    nepisodes: int
    v_avg: float
    tderr_avg: float
    q_max: float
    epsilon: float
    lr: float
    train_time: float
    train_fps: float
    eval_time: float
    eval_fps: float

    def summary(self) -> str:
        """``train_agent.lua``'s evaluation lines: the V line (Lua's ``print``: tabs, ``%.14g``), a
        blank line (the Lua's ``Steps`` format starts with a newline), then the ``Steps`` summary."""
        return (f"V\t{self.v_avg:.14g}\tTD error\t{self.tderr_avg:.14g}\tQmax\t{self.q_max:.14g}\n\n"
                f"Steps: {self.step} (frames: {self.frames}), reward: {self.reward:.2f}, "
                f"epsilon: {self.epsilon:.2f}, lr: {self.lr:G}, training time: {int(self.train_time)}s, "
                f"training rate: {int(self.train_fps)}fps, testing time: {int(self.eval_time)}s, "
                f"testing rate: {int(self.eval_fps)}fps,  num. ep.: {self.nepisodes},  "
                f"num. rewards: {self.nrewards}")


@dataclasses.dataclass
class Event:
    """Yielded after each agent step; ``evaluation`` is set when one just finished."""

    step: int
    evaluation: Evaluation | None = None


class Trainer:
    """DQN 3.0's training run under ``config`` on CUDA device ``device_gpu`` (already checked; -1: the
    CPU). Like ``initenv.lua``, it seeds torch and sets its threads (``self.threads``) for the process.
    ``pretrained``: start from ``config.network``; False where a checkpoint will restore the networks
    (the file may be gone by then).

    Raises:
        environment.GameError: unknown game or missing ROM.
        history.HistoryError: ``config.network`` is unreadable or does not fit the game.
    """

    def __init__(self, config: Config, device_gpu: int = -1, pretrained: bool = True):
        self.config = config
        torch.manual_seed(config.seed)
        self.threads = set_threads(config.threads)
        self.env = GameEnvironment(config.game, config.game_path, config.actrep, config.random_starts,
                                   config.pool_size, config.pool_type, seed=config.seed)
        self.actions = self.env.get_actions()
        self.agent = NeuralQLearner(self.actions, gpu=device_gpu, precision=config.precision, seed=config.seed,
                                    **config.agent_params())
        if config.network and pretrained:
            self.load_network(config.network, config.best)
        self.history = {key: [] for key in HISTORY_FIELDS}
        self.history["time_history"].append(0.0)
        self.best_network = None  # state_dict copy of the best evaluated network
        self.step = 0
        self.train_time = 0.0  # seconds since the start, evaluations' eval_steps steps excluded
        self._clock = time.perf_counter()  # when train_time was last brought up to date (run() sets it)
        self.evaluating = False  # true while evaluate() plays its eval_steps steps

    def schedule_warnings(self) -> list[str]:
        """Warnings for a run that ends, from ``self.step`` on, before learning starts or before its
        next evaluation (counts in agent steps). No Lua counterpart."""
        c, agent = self.config, self.agent
        warnings = []
        # perceive() learns when num_steps, one less than the step, is past learn_start and a
        # multiple of update_freq.
        learning = agent.learn_start + agent.replay_restart
        first_update = (learning // agent.update_freq + 1) * agent.update_freq + 1
        if c.steps < first_update and agent.replay_restart:
            warnings.append(f"warning: the run ends at step {c.steps}, before learning resumes at step {first_update} "
                            "(--learn-start steps refill the empty replay memory): the network is not trained further")
        elif c.steps < first_update:
            warnings.append(f"warning: the run ends at step {c.steps}, before learning starts at step {first_update} "
                            "(the first update after --learn-start): the network is not trained")
        first = (max(self.step, agent.learn_start) // c.eval_freq + 1) * c.eval_freq
        if first > c.steps:
            warnings.append(f"warning: the run ends at step {c.steps}, before the next evaluation at step {first} "
                            "(every --eval-freq after --learn-start)")
        return warnings

    def load_network(self, path: str, best: bool = False) -> None:
        """Start from the network of a history ``.h5``, a ``.params.h5``, or a DQN 3.0 ``.t7`` or
        ``.params.t7`` (the Lua ``-network`` flag); ``best``: its ``best_model``.

        Raises:
            history.HistoryError: unreadable file, a history holding only the other network (the
                message says whether to add or leave out ``--best``), or a network that does not fit
                the game.
        """
        def other_only(which):
            advice = "add --best" if which == "best_model" else "leave out --best"
            raise HistoryError(f"{path} holds only its {LABELS[which]} ({which}): {advice} to start from it")

        state, _ = load_network(path, best, only=other_only)
        if misfit := network_misfit(state, self.config.game, len(self.actions), self.agent.network.in_channels):
            raise HistoryError(f"{path}: {misfit}")
        self.agent.network.load_state_dict(state)
        self.agent.target_network.load_state_dict(self.agent.network.state_dict())

    def run(self) -> Iterator[Event]:
        """Train for ``config.steps`` agent steps, evaluating every ``eval_freq`` steps after
        ``learn_start``; yields an ``Event`` after every step (the main loop of ``train_agent.lua``)."""
        c, env, agent = self.config, self.env, self.agent
        screen, reward, terminal = env.get_state()
        self._clock = time.perf_counter()
        while self.step < c.steps:
            self.step += 1
            action = agent.perceive(reward, screen, terminal)
            if not terminal:
                screen, reward, terminal = env.step(self.actions[action], training=True)
            elif c.random_starts > 0:
                screen, reward, terminal = env.next_random_game()
            else:
                screen, reward, terminal = env.new_game()
            evaluation = None
            if self.step % c.eval_freq == 0 and self.step > agent.learn_start:
                evaluation = self.evaluate()
                screen, reward, terminal = env.get_state()
            self._count_train_time()  # every step, so a checkpoint or a stop between evaluations has it
            yield Event(self.step, evaluation)

    def _count_train_time(self) -> None:
        now = time.perf_counter()
        self.train_time += now - self._clock
        self._clock = now

    def evaluate(self) -> Evaluation:
        """Play ``eval_steps`` steps at epsilon 0.05 without life-loss terminals, record the
        histories and keep the best network (the evaluation block of ``train_agent.lua``)."""
        c, env, agent = self.config, self.env, self.agent
        self.evaluating = True  # from here: new_game() can play a whole game out first
        screen, reward, terminal = env.new_game()
        start = time.perf_counter()
        total_reward = episode_reward = 0.0
        nrewards = nepisodes = 0
        for _ in range(c.eval_steps):
            action = agent.perceive(reward, screen, terminal, testing=True, testing_ep=TESTING_EP)
            screen, reward, terminal = env.step(self.actions[action or 0])
            episode_reward += reward
            nrewards += reward != 0
            if terminal:
                total_reward += episode_reward
                episode_reward = 0.0
                nepisodes += 1
                screen, reward, terminal = env.next_random_game()
        self.evaluating = False
        eval_time = time.perf_counter() - start
        self._clock += eval_time  # the eval_steps steps are not training time; all the rest is
        agent.compute_validation_statistics()
        mean_reward = total_reward / max(1, nepisodes)
        h = self.history
        if not h["reward_history"] or mean_reward > max(h["reward_history"]):
            self.best_network = copy.deepcopy(agent.network.state_dict())
        nan = float("nan")
        for key, value in (("v_history", agent.v_avg), ("td_history", agent.tderr_avg),
                           ("qmax_history", agent.q_max), ("reward_history", mean_reward),
                           ("reward_counts", nrewards), ("episode_counts", nepisodes),
                           ("step_history", self.step)):
            h[key].append(nan if value is None else value)
        previous = h["time_history"][-1]
        self._count_train_time()
        h["time_history"].append(self.train_time)
        train_dt = self.train_time - previous
        return Evaluation(
            step=self.step, frames=self.step * c.actrep, reward=mean_reward, nrewards=nrewards,
            nepisodes=nepisodes, v_avg=h["v_history"][-1], tderr_avg=h["td_history"][-1],
            q_max=agent.q_max, epsilon=agent.ep, lr=agent.lr, train_time=train_dt,
            train_fps=c.actrep * c.eval_freq / max(train_dt, 1e-9), eval_time=eval_time,
            eval_fps=c.actrep * c.eval_steps / max(eval_time, 1e-9))

    def get_state(self) -> dict:
        """The run's position for a checkpoint: step, training time, histories, best network,
        agent, environment and the global random generators (Python, NumPy, torch). It shares
        the agent's tensors (see ``NeuralQLearner.get_state``). No Lua counterpart."""
        legacy = np.random.get_state()
        return dict(step=self.step, train_time=self.train_time,
                    history={k: np.asarray(v, HISTORY_FIELDS[k]) for k, v in self.history.items()},
                    best_network=self.best_network, agent=self.agent.get_state(), env=self.env.clone_state(),
                    torch_rng=torch.get_rng_state().numpy(), python_rng=json.dumps(random.getstate()),
                    numpy_rng=dict(keys=legacy[1], pos=legacy[2], has_gauss=legacy[3], gauss=legacy[4]))

    def set_state(self, state: dict, replay_restored: bool) -> None:
        """Continue from ``get_state()`` (see ``NeuralQLearner.set_state`` for ``replay_restored``).
        No Lua counterpart."""
        self.step, self.train_time = int(state["step"]), float(state["train_time"])
        self.history = {k: np.asarray(v).tolist() for k, v in state["history"].items()}
        best = state.get("best_network")
        self.best_network = None if best is None else {k: torch.as_tensor(v) for k, v in best.items()}
        self.agent.set_state(state["agent"], replay_restored)
        self.env.restore_state(state["env"])
        torch.set_rng_state(torch.as_tensor(state["torch_rng"], dtype=torch.uint8))
        version, internal, gauss = json.loads(state["python_rng"])
        random.setstate((version, tuple(internal), gauss))
        n = state["numpy_rng"]
        np.random.set_state(("MT19937", n["keys"], int(n["pos"]), int(n["has_gauss"]), float(n["gauss"])))

    def save(self) -> str:
        """Write ``<base>.h5`` (and ``<base>.params.h5`` with save_network_params), ``<base>`` being
        ``name[_<step // save_versions>]``; return its path (``train_agent.lua``'s ``torch.save``).

        Raises:
            OSError: the file cannot be written (the previous one stays intact).
        """
        c = self.config
        base = f"{c.name}_{self.step // c.save_versions}" if c.save_versions > 0 else c.name
        path = base + ".h5"
        save_history(path, game=c.game, steps=self.step, frames=self.step * c.actrep, history=self.history,
                     model=self.agent.network.state_dict(), best_model=self.best_network,
                     arguments=c.as_dict(), package_version=__version__)
        if c.save_network_params:
            save_network_params(base + ".params.h5", self.agent.network)
        return path


def resolve_device(gpu: int, warn) -> int:
    """The CUDA device to use for ``--gpu``: ``gpu`` if CUDA has it, else -1 after ``warn(message)``
    (``initenv.lua``'s ``torchSetup``, which failed without cutorch)."""
    if gpu < 0:
        return -1
    if not torch.cuda.is_available():
        warn(f"warning: --gpu {gpu} asked for but CUDA is not available; running on the CPU")
        return -1
    if gpu >= torch.cuda.device_count():
        warn(f"warning: no CUDA device {gpu} ({torch.cuda.device_count()} present); running on the CPU")
        return -1
    return gpu


def set_threads(threads: int) -> int:
    """Use ``min(threads, cores)`` torch threads, returned (``initenv.lua``'s ``torch.setnumthreads``),
    and one BLAS thread: NumPy's small products gain nothing from threads, and its BLAS threads
    spinning beside torch's cost 2-3x in steps per second."""
    n = max(1, min(threads, os.cpu_count() or 1))
    torch.set_num_threads(n)
    threadpoolctl.threadpool_limits(1, user_api="blas")
    return n


def cpu_capabilities() -> dict:
    """``torch.cpu.get_capabilities()`` ("architecture", "cpu_name", flags such as "amx_tile"); empty
    with an older torch that lacks it."""
    return getattr(torch.cpu, "get_capabilities", dict)()


def precision_warning(precision: str, gpu: int) -> str | None:
    """The warning ``--precision precision`` on device ``gpu`` (-1: the CPU) earns, or None: tf32 is a
    CUDA mode; x86 CPUs without AMX or AVX-512 BF16 emulate bf16, several times slower. No Lua counterpart."""
    if gpu >= 0 or precision == "fp32":
        return None
    if precision == "tf32":
        return "warning: --precision tf32 is a CUDA mode; computing in fp32 on the CPU"
    cpu = cpu_capabilities()  # empty with an older torch: no warning
    if cpu.get("architecture") != "x86_64" or cpu.get("amx_tile") or cpu.get("avx512_bf16"):
        return None
    return ("warning: this CPU has neither AMX nor AVX-512 BF16: --precision bf16 is emulated, "
            "about 5 times slower than fp32")
