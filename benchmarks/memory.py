"""Replay memory footprint: a full ``TransitionTable``, then a trainer run with a full one.

Collects ``--frames`` real preprocessed Pong frames (GameEnvironment, preprocess,
random play), fills a table of ``--size`` transitions (default 1,000,000) by ``add()``,
cycling through them, and prints the bytes per transition and this process's peak resident
memory. Then, in a fresh process, builds the real ``Trainer`` at that replay size, fills its
table the same way, trains ``--steps`` steps (sampling over the whole table, updating,
evaluating) and saves a history file, and prints that process's peak resident memory.

A run started from an empty table touches only the pages it has written (NumPy's zeros
are allocated lazily), so a short ``dqn-train --replay-memory 1000000`` says nothing about
the memory of a full one; hence the filled table.

    python benchmarks/memory.py --size 1000000
"""
from __future__ import annotations

import multiprocessing
import resource
import tempfile
import time

import click
import numpy as np

from dqn_nature.config import resolve
from dqn_nature.environment import GameEnvironment
from dqn_nature.preprocess import preprocess
from dqn_nature.train import Trainer
from dqn_nature.transition_table import TransitionTable


def peak_rss_gb() -> float:
    """Peak resident memory of this process in GB (1e9 bytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def collect(n: int, seed: int = 1):
    """``n`` preprocessed frames from random Pong play: uint8 (n, 7056), terminal flags bool (n,),
    clipped rewards float32 (n,), and the number of actions."""
    env = GameEnvironment("pong", seed=seed)
    rng = np.random.default_rng(seed)
    actions = env.get_actions()
    frames = np.empty((n, 7056), np.uint8)
    terminals = np.empty(n, np.bool_)
    rewards = np.empty(n, np.float32)
    screen, reward, terminal = env.get_state()
    for i in range(n):
        frames[i], terminals[i], rewards[i] = preprocess(screen), terminal, np.clip(reward, -1, 1)
        if terminal:
            screen, reward, terminal = env.next_random_game()
        else:
            screen, reward, terminal = env.step(actions[rng.integers(len(actions))], training=True)
    return frames, terminals, rewards, len(actions)


def fill(table: TransitionTable, frames, terminals, rewards, n: int) -> float:
    """``add()`` ``n`` transitions cycling through the frames; returns the seconds taken."""
    start = time.perf_counter()
    k = len(frames)
    for i in range(n):
        j = i % k
        table.add(frames[j], i % table.num_actions, rewards[j], terminals[j])
    return time.perf_counter() - start


def table_bytes(table: TransitionTable) -> int:
    """Bytes of the table's per-transition arrays."""
    return table.s.nbytes + table.a.nbytes + table.r.nbytes + table.t.nbytes


def train_full(size: int, steps: int, precision: str, folder: str) -> None:
    """(In a fresh process.) A Trainer with a full table of ``size`` filled from
    ``<folder>/frames.npz``: train, save, print peak RSS. The frames are freed before training."""
    config = resolve(dict(game="pong", replay_memory=size, learn_start=600, steps=steps, eval_freq=steps // 2,
                          eval_steps=200, threads=1, precision=precision, name=f"{folder}/memory", verbose=0))
    trainer = Trainer(config)
    with np.load(f"{folder}/frames.npz") as data:
        fill(trainer.agent.transitions, data["frames"], data["terminals"], data["rewards"], size)
    for _ in trainer.run():
        pass
    trainer.save()
    print(f"trainer ({precision}): {steps} steps with a full table of {size} transitions, history saved; "
          f"peak RSS {peak_rss_gb():.3f} GB", flush=True)


@click.command(context_settings=dict(help_option_names=["-h", "--help"]))
@click.option("--size", default=1_000_000, show_default=True, help="replay memory size in transitions")
@click.option("--frames", default=5000, show_default=True, help="real frames collected and cycled")
@click.option("--steps", default=2000, show_default=True, help="trainer steps on the full table (0: skip)")
@click.option("--precision", default="fp32", show_default=True, type=click.Choice(["fp32", "bf16"]),
              help="the trainer's --precision")
def main(size, frames, steps, precision):
    """Peak memory of a full replay memory of SIZE transitions, alone and in a trainer."""
    data = collect(frames)
    before = peak_rss_gb()
    table = TransitionTable(7056, data[3], 4, size, 512, rng=np.random.default_rng(0))
    seconds = fill(table, *data[:3], size)
    table.fill_buffer()
    per = table_bytes(table) / size
    click.echo(f"table: {size} transitions in {seconds:.0f} s by add(), {per:.0f} bytes per transition "
               f"({table_bytes(table) / 1e9:.2f} GB); peak RSS {peak_rss_gb():.3f} GB "
               f"({before:.2f} GB before the table)")
    del table
    if steps:
        with tempfile.TemporaryDirectory() as folder:
            np.savez(f"{folder}/frames.npz", frames=data[0], terminals=data[1], rewards=data[2])
            child = multiprocessing.get_context("spawn").Process(target=train_full,
                                                                 args=(size, steps, precision, folder))
            child.start()
            child.join()
        if child.exitcode:
            raise SystemExit(f"memory.py: the trainer process failed (exit status {child.exitcode})")


if __name__ == "__main__":
    main()
