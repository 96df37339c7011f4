"""Learning-phase throughput of the real trainer, its components, and the baseline.

Runs ``dqn_nature.train.Trainer`` on Pong with the paper's settings except the replay size
(``--replay``), ``learn_start`` (``--learn-start``) and epsilon, which is held at
``--epsilon`` (default 0.1, the paper's final value, so that nine steps in ten take a
greedy forward pass as in most of a real run; early in a run epsilon is near 1 and that
forward is skipped). After ``learn_start`` and a short warm-up it times ``--steps`` agent
steps and prints steps/s and frames/s (x4), in wall time and per CPU second (the process's
CPU time: on a shared machine the steadier figure).

Then the cost of each component in isolation on the same trainer: the emulator step
(actrep 4, pooling), preprocessing, the action-selection forward pass, the minibatch sample,
two parts of an update (the stored states' conversion to the network's input, twice an
update, and the RMSProp step) and the update; their per-step sum is the floor (forward x
greedy fraction, update / update_freq) and loop / floor is what the loop itself adds.

    python benchmarks/throughput.py --threads 1 --steps 2000 --precision fp32 --precision bf16 --vs-baseline

With ``--vs-baseline`` each round times ``benchmarks/baseline.py`` and then each precision
in this process, and prints the ratio to that round's baseline.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import click
import numpy as np
import torch

from dqn_nature.config import resolve
from dqn_nature.preprocess import preprocess
from dqn_nature.train import Trainer, cpu_capabilities, set_threads

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline  # noqa: E402  (the sibling script)

WARMUP = 100  # learning steps before the clock starts


class Clock:
    """Wall and process CPU seconds between ``start()`` and ``stop()`` (synchronising CUDA)."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def start(self):
        """Start timing."""
        self._sync()
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        """(wall, process CPU) seconds since ``start()``."""
        self._sync()
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def make_trainer(steps, learn_start, replay, epsilon, precision, threads, gpu) -> Trainer:
    """A Pong trainer with the paper's settings but these, and no evaluation."""
    total = learn_start + WARMUP + steps
    config = resolve(dict(game="pong", steps=total, eval_freq=total + 1, replay_memory=replay,
                          learn_start=learn_start, ep=epsilon, ep_end=epsilon, precision=precision,
                          threads=threads, gpu=gpu, verbose=0))
    return Trainer(config, gpu)


def time_loop(trainer: Trainer, cuda: bool) -> tuple[float, float]:
    """Run the trainer to the end; (agent steps per wall second, per CPU second) after
    learn_start + WARMUP."""
    clock = Clock(cuda)
    first = trainer.agent.learn_start + WARMUP
    for event in trainer.run():
        if event.step == first:
            clock.start()
    wall, cpu = clock.stop()
    n = trainer.config.steps - first
    return n / wall, n / cpu


def per_call(fn, n: int, cuda: bool, blocks: int = 5) -> tuple[float, float]:
    """Median over ``blocks`` blocks of the (wall, CPU) seconds per call of ``fn()``."""
    fn()
    clock, walls, cpus = Clock(cuda), [], []
    for _ in range(blocks):
        clock.start()
        for _ in range(n):
            fn()
        wall, cpu = clock.stop()
        walls.append(wall / n)
        cpus.append(cpu / n)
    return statistics.median(walls), statistics.median(cpus)


def components(trainer: Trainer, cuda: bool, n: int) -> dict:
    """(wall, CPU) seconds per call of each component, on the trainer's own objects."""
    env, agent = trainer.env, trainer.agent
    rng = np.random.default_rng(0)
    actions = trainer.actions
    screen = env.get_state()[0]
    states = np.array(agent.transitions.sample(agent.minibatch_size)[0])

    def env_step():
        _, _, terminal = env.step(actions[rng.integers(len(actions))], training=True)
        if terminal:
            env.next_random_game()

    return {
        "emulator step (actrep 4, pooling)": per_call(env_step, n, cuda),
        "preprocess (scale_y, to_bytes)": per_call(lambda: preprocess(screen), n, cuda),
        "action forward (get_recent, greedy)": per_call(
            lambda: agent.greedy(agent.transitions.get_recent()), n, cuda),
        "minibatch sample (32)": per_call(lambda: agent.transitions.sample(agent.minibatch_size), n, cuda),
        "input conversion (32 stored states)": per_call(lambda: agent._to_input(states), n, cuda),
        "RMSProp step (optimizer.step)": per_call(agent.optimizer.step, max(1, n // 4), cuda),
        "update (q_learn_minibatch, incl. sample)": per_call(agent.q_learn_minibatch, max(1, n // 4), cuda),
    }


def report_components(costs: dict, loop_rates: tuple[float, float], epsilon: float, update_freq: int) -> None:
    """Print each component in ms per call, the per-step floor, and loop / floor."""
    loop = [1 / x for x in loop_rates]
    weights = dict(zip(costs, (1.0, 1.0, 1.0 - epsilon, 0.0, 0.0, 0.0, 1.0 / update_freq)))
    floor = [sum(weights[k] * costs[k][i] for k in costs) for i in (0, 1)]
    click.echo(f"  {'component':44s} {'wall ms':>9s} {'CPU ms':>9s}  per step")
    for name, (wall, cpu) in costs.items():
        share = "(in update)" if weights[name] == 0 else f"x {weights[name]:.3g}"
        click.echo(f"  {name:44s} {1e3 * wall:9.3f} {1e3 * cpu:9.3f}  {share}")
    click.echo(f"  {'floor per step':44s} {1e3 * floor[0]:9.3f} {1e3 * floor[1]:9.3f}")
    click.echo(f"  {'loop per step':44s} {1e3 * loop[0]:9.3f} {1e3 * loop[1]:9.3f}")
    click.echo(f"  {'loop / floor':44s} {loop[0] / floor[0]:9.2f} {loop[1] / floor[1]:9.2f}")


def rates(steps_per_s: tuple[float, float]) -> str:
    """(steps per wall second, per CPU second) as text, with frames/s at actrep 4."""
    wall, cpu = steps_per_s
    return f"{wall:7.1f} steps/s ({4 * wall:6.0f} frames/s), {cpu:7.1f} steps per CPU s"


def machine(cuda: bool) -> str:
    """The CPU (name, logical cores, torch's vector capability, native bfloat16 units) and, on
    CUDA, the GPU: figures from different machines are not comparable."""
    cpu = cpu_capabilities()
    units = [name for name in ("avx512_bf16", "amx_tile") if cpu.get(name)] or ["no native bf16"]
    text = (f"{cpu.get('cpu_name', 'CPU')}, {os.cpu_count()} logical cores, "
            f"{torch.backends.cpu.get_cpu_capability()}, {' '.join(units)}")
    return text + (f"; {torch.cuda.get_device_name(0)}" if cuda else "")


@click.command(context_settings=dict(help_option_names=["-h", "--help"]))
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--precision", type=click.Choice(["fp32", "bf16", "tf32"]), multiple=True, default=["fp32"],
              show_default=True, help="repeat to time several")
@click.option("--threads", default=1, show_default=True,
              help="torch CPU threads (NumPy's BLAS gets 1); use 1 while other processes load the CPU")
@click.option("--steps", default=2000, show_default=True, help="timed learning-phase agent steps")
@click.option("--learn-start", default=1000, show_default=True)
@click.option("--replay", default=20_000, show_default=True, help="replay memory size")
@click.option("--epsilon", default=0.1, show_default=True, help="exploration rate held while timed")
@click.option("--rounds", default=1, show_default=True, help="repetitions of the whole measurement")
@click.option("--vs-baseline", is_flag=True, help="also time benchmarks/baseline.py in each round")
@click.option("--components/--no-components", "components_", default=True, show_default=True,
              help="time the components after the first round of each precision")
@click.option("--component-calls", default=200, show_default=True, help="calls per timing block")
def main(device, precision, threads, steps, learn_start, replay, epsilon, rounds, vs_baseline, components_,
         component_calls):
    """Time the trainer's learning phase on Pong (see the module docstring)."""
    cuda = device == "cuda"
    if "tf32" in precision and not cuda:
        raise click.BadParameter("tf32 is a CUDA mode (on the CPU it is fp32)", param_hint="--precision")
    gpu = 0 if cuda else -1
    n = set_threads(threads)
    click.echo(f"machine: {machine(cuda)}")
    click.echo(f"torch {torch.__version__}, {n} torch thread(s), device {device}, steps {steps}, "
               f"learn_start {learn_start}, replay {replay}, epsilon {epsilon}")
    ratios = {p: [] for p in precision}
    for r in range(rounds):
        base = None
        if vs_baseline:
            base = baseline.run(steps, learn_start, replay, epsilon, device, warmup=WARMUP)
            click.echo(f"round {r}: baseline {rates(base)}")
        for p in precision:
            trainer = make_trainer(steps, learn_start, replay, epsilon, p, threads, gpu)
            loop = time_loop(trainer, cuda)
            line = f"round {r}: {p:12s} {rates(loop)}"
            if base:
                ratio = (loop[0] / base[0], loop[1] / base[1])
                ratios[p].append(ratio)
                line += f"  x{ratio[0]:.2f} baseline (wall), x{ratio[1]:.2f} (CPU)"
            click.echo(line)
            if components_ and r == 0:
                report_components(components(trainer, cuda, component_calls), loop, epsilon,
                                  trainer.agent.update_freq)
            del trainer
    for p, rs in ratios.items():
        if rs:
            click.echo(f"{p} / baseline, median of {len(rs)}: x{statistics.median(x[0] for x in rs):.2f} (wall), "
                       f"x{statistics.median(x[1] for x in rs):.2f} (CPU)")


if __name__ == "__main__":
    main()
