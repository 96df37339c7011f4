"""A straightforward PyTorch DQN, the yardstick of ``throughput.py --vs-baseline``.

Written as the widely used single-file implementations are: an ALE environment stepped one
frame at a time with action repeat 4 and a max over the last two RGB frames, grayscale and
an 84x84 area resize by OpenCV, four-frame stacks stored per transition for both the
observation and the next observation (uint8, 56,448 bytes per transition), PyTorch's
default tensor layout, ``torch.optim.RMSprop(lr=2.5e-4, alpha=0.95, eps=0.01)`` on the
Huber loss, batch 32, one update every 4 steps, a target network copied every 10,000 steps,
and DQN 3.0's network (``dqn_nature.convnet.convnet_atari3``). It is not DQN 3.0 (other
optimiser, loss and preprocessing) and only serves to time the same amount of work.

    python benchmarks/baseline.py --steps 2000
"""
from __future__ import annotations

import time

import click
import cv2
import numpy as np
import torch
import torch.nn.functional as F
from ale_py import ALEInterface, LoggerMode, roms

from dqn_nature.convnet import convnet_atari3

ALEInterface.setLoggerMode(LoggerMode.Error)


class AtariEnv:
    """ALE with frame skip 1 driven in Python: action repeat, max-pool of the last two
    frames, 84x84 grayscale, a stack of the last four; a lost life ends an episode."""

    def __init__(self, game: str = "pong", seed: int = 1, repeat: int = 4, noop_max: int = 30):
        self.ale = ALEInterface()
        self.ale.setInt("random_seed", seed)
        self.ale.setFloat("repeat_action_probability", 0.0)
        self.ale.loadROM(str(roms.get_rom_path(game)))
        self.actions = self.ale.getMinimalActionSet()
        self.repeat, self.noop_max = repeat, noop_max
        self.rng = np.random.default_rng(seed)
        h, w = self.ale.getScreenDims()
        self.raw = np.zeros((2, h, w, 3), np.uint8)
        self.stack = np.zeros((4, 84, 84), np.uint8)

    def _observe(self) -> np.ndarray:
        gray = cv2.cvtColor(self.raw.max(axis=0), cv2.COLOR_RGB2GRAY)
        self.stack[:-1] = self.stack[1:]
        self.stack[-1] = cv2.resize(gray, (84, 84), interpolation=cv2.INTER_AREA)
        return self.stack.copy()

    def reset(self) -> np.ndarray:
        """A new episode after 1..noop_max no-ops (a new game only when the last one is over);
        returns the uint8 (4, 84, 84) stack."""
        if self.ale.game_over():
            self.ale.reset_game()
        for _ in range(self.rng.integers(1, self.noop_max + 1)):
            self.ale.act(self.actions[0])
        self.raw[:] = 0
        self.ale.getScreenRGB(self.raw[1])
        self.stack[:] = 0
        self.lives = self.ale.lives()
        return self._observe()

    def step(self, action: int):
        """Repeat ``action`` (an index in the minimal set) ``repeat`` frames, stopping at a lost life or
        game over; returns (uint8 (4, 84, 84) stack, unclipped reward sum, done)."""
        reward = 0.0
        for k in range(self.repeat):
            reward += self.ale.act(self.actions[action])
            if k >= self.repeat - 2:
                self.ale.getScreenRGB(self.raw[k - self.repeat + 2])
            done = self.ale.game_over() or self.ale.lives() < self.lives
            if done:
                break
        self.lives = self.ale.lives()
        return self._observe(), reward, done


class ReplayBuffer:
    """Observations and next observations as uint8 four-frame stacks, sampled uniformly."""

    def __init__(self, size: int):
        self.obs = np.zeros((size, 4, 84, 84), np.uint8)
        self.next_obs = np.zeros_like(self.obs)
        self.actions = np.zeros(size, np.int64)
        self.rewards = np.zeros(size, np.float32)
        self.dones = np.zeros(size, np.float32)
        self.size, self.pos, self.full = size, 0, False

    def add(self, obs, next_obs, action, reward, done):
        """Store one transition (stacks uint8 (4, 84, 84)), overwriting the oldest when full."""
        i = self.pos
        self.obs[i], self.next_obs[i] = obs, next_obs
        self.actions[i], self.rewards[i], self.dones[i] = action, reward, done
        self.pos = (i + 1) % self.size
        self.full = self.full or self.pos == 0

    def sample(self, n: int, device):
        """``n`` transitions drawn with replacement, as tensors on ``device``: obs uint8 (n, 4, 84, 84),
        actions int64 (n,), rewards float32 (n,), next_obs uint8 (n, 4, 84, 84), dones float32 (n,)."""
        idx = np.random.randint(0, self.size if self.full else self.pos, n)
        return tuple(torch.from_numpy(x[idx]).to(device)
                     for x in (self.obs, self.actions, self.rewards, self.next_obs, self.dones))


def run(steps: int = 2000, learn_start: int = 1000, replay_size: int = 20_000, epsilon: float = 0.1,
        device: str = "cpu", seed: int = 1, warmup: int = 100) -> tuple[float, float]:
    """Fill ``learn_start`` steps at random, run ``warmup`` learning steps, then time ``steps``
    learning steps (acting at ``epsilon``, an update every 4 steps).

    Returns (agent steps per wall-clock second, agent steps per CPU second of this process)
    of the timed part; frames are 4 per step."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    device = torch.device(device)
    env = AtariEnv(seed=seed)
    n_actions = len(env.actions)
    q_net = convnet_atari3(n_actions).to(device)
    target_net = convnet_atari3(n_actions).to(device)
    target_net.load_state_dict(q_net.state_dict())
    optimizer = torch.optim.RMSprop(q_net.parameters(), lr=2.5e-4, alpha=0.95, eps=0.01)
    buffer = ReplayBuffer(replay_size)
    obs = env.reset()
    total = learn_start + warmup + steps
    for step in range(total):
        if step == learn_start + warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start, cpu = time.perf_counter(), time.process_time()
        if step < learn_start or np.random.random() < epsilon:
            action = np.random.randint(n_actions)
        else:
            with torch.no_grad():
                q = q_net(torch.from_numpy(obs).to(device).float().div(255).unsqueeze(0))
            action = int(q.argmax(1).item())
        next_obs, reward, done = env.step(action)
        buffer.add(obs, next_obs, action, np.sign(reward), done)
        obs = env.reset() if done else next_obs
        if step >= learn_start and step % 4 == 0:
            s, a, r, s2, d = buffer.sample(32, device)
            with torch.no_grad():
                target = r + 0.99 * (1 - d) * target_net(s2.float().div(255)).max(1).values
            q = q_net(s.float().div(255)).gather(1, a[:, None])[:, 0]
            loss = F.smooth_l1_loss(q, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if step % 10_000 == 0:
            target_net.load_state_dict(q_net.state_dict())
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps / (time.perf_counter() - start), steps / (time.process_time() - cpu)


@click.command()
@click.option("--steps", default=2000, show_default=True, help="timed learning-phase agent steps")
@click.option("--learn-start", default=1000, show_default=True, help="random steps before learning")
@click.option("--replay-size", default=20_000, show_default=True, help="replay capacity in transitions")
@click.option("--epsilon", default=0.1, show_default=True, help="exploration rate while timed")
@click.option("--device", default="cpu", show_default=True, help="cpu or cuda[:n]")
@click.option("--threads", default=1, show_default=True, help="torch CPU threads")
def main(steps, learn_start, replay_size, epsilon, device, threads):
    """Time the learning phase of the straightforward DQN."""
    torch.set_num_threads(threads)
    rate, cpu_rate = run(steps, learn_start, replay_size, epsilon, device)
    click.echo(f"baseline: {rate:.1f} steps/s ({4 * rate:.0f} frames/s), {cpu_rate:.1f} steps per CPU s")


if __name__ == "__main__":
    main()
