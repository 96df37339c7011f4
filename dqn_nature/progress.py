"""``dqn-train``'s progress: a tqdm bar on a terminal, else a line every ``prog_freq`` steps,
with the rate and the time left (ETA) of the run."""
from __future__ import annotations

import sys
import time

import click
from tqdm import tqdm


class TimeLeft:
    """The time a run of ``steps`` agent steps has left: the steps left at the seconds per step, an
    exponential moving average (newest interval's ``weight`` in (0, 1]) over the intervals between
    ``report``s, evaluations excluded; plus the evaluations left at the same average of their seconds,
    one counting as ``eval_steps`` training steps until one is seen (an overestimate: they do not
    learn). ``clock``: monotonic, in seconds. No Lua counterpart.
    """

    def __init__(self, steps: int, eval_freq: int, eval_steps: int, learn_start: int, clock=time.monotonic,
                 weight: float = 0.1):
        self.steps, self.eval_freq, self.eval_steps, self.learn_start = steps, eval_freq, eval_steps, learn_start
        self.clock, self.weight = clock, weight
        self.eval_seconds = None
        self.start(0)

    def _average(self, average: float | None, value: float) -> float:
        return value if average is None else average + self.weight * (value - average)

    def start(self, step: int) -> None:
        """Measure from agent step ``step``, now, forgetting the rate measured so far (a new
        phase: learning makes steps many times slower than random play)."""
        self.mark, self.pending, self.step_seconds = (step, self.clock()), 0.0, None

    def evaluated(self, seconds: float) -> None:
        """Count an evaluation that took ``seconds`` since the last report."""
        self.eval_seconds = self._average(self.eval_seconds, seconds)
        self.pending += seconds

    def report(self, step: int) -> None:
        """Take the interval since the last report or ``start``, up to agent step ``step``, into the rate."""
        (last, since), now = self.mark, self.clock()
        seconds = now - since - self.pending
        if step > last and seconds > 0:
            self.step_seconds = self._average(self.step_seconds, seconds / (step - last))
        self.mark, self.pending = (step, now), 0.0

    def rate(self) -> float | None:
        """Agent steps per second of training (evaluations excluded), None before a report."""
        return None if self.step_seconds is None else 1 / self.step_seconds

    def seconds(self, step: int) -> float | None:
        """Seconds left at agent step ``step`` (an evaluation due at it done), None before a report."""
        if self.step_seconds is None:
            return None
        evaluations = max(0, self.steps // self.eval_freq - max(step, self.learn_start) // self.eval_freq)
        evaluation = self.eval_seconds if self.eval_seconds is not None else self.eval_steps * self.step_seconds
        return (self.steps - step) * self.step_seconds + evaluations * evaluation


class Progress:
    """The progress of ``trainer``'s run (a ``train.Trainer``): a tqdm bar on a terminal, else a line
    every ``prog_freq`` steps, with ``train_agent.lua``'s prints (``agent:report()`` norms at verbose
    >= 2, the evaluations' summaries) above it. The rate and the time left (``TimeLeft``, on ``clock``;
    no Lua counterpart) are measured from the start of the phase, random play or learning; the time
    left is "?" until learning has been measured, unless the run ends before learning starts.
    """

    def __init__(self, trainer, clock=time.monotonic):
        self.trainer, c, agent = trainer, trainer.config, trainer.agent
        rewards = trainer.history["reward_history"]  # a resumed run has some
        self.last_reward = f"{rewards[-1]:.2f}" if rewards else None
        self.learning_after = agent.learn_start + agent.replay_restart  # the agent step after which it learns
        self.learning = agent.num_steps > self.learning_after
        self.time_left = TimeLeft(c.steps, c.eval_freq, c.eval_steps, agent.learn_start, clock)
        self.time_left.start(trainer.step)
        self.bar = _Bar(self.figures, total=c.steps, initial=trainer.step, unit="step", dynamic_ncols=True,
                        disable=not sys.stderr.isatty() or c.verbose < 1,
                        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {figures}]")

    def eta(self) -> str:
        """The time left as ``tqdm.format_interval`` writes it ("1:02:03"), or "?"."""
        seconds = self.time_left.seconds(self.trainer.step)
        if seconds is None or not (self.learning or self.trainer.config.steps <= self.learning_after + 1):
            return "?"
        return tqdm.format_interval(seconds)

    def rate(self) -> str:
        """Agent steps per second of training, one decimal ("52.1"), or "?"."""
        rate = self.time_left.rate()
        return "?" if rate is None else f"{rate:.1f}"

    def figures(self) -> str:
        """ETA, rate, frames, epsilon and the last evaluation's reward, as the bar shows them."""
        t = self.trainer
        reward = f", reward {self.last_reward}" if self.last_reward is not None else ""
        return (f"ETA {self.eta()}, {self.rate()} steps/s, "
                f"frames {t.step * t.config.actrep}, epsilon {t.agent.train_epsilon():.3f}{reward}")

    def write(self, text: str) -> None:
        """Print a line (above the bar on a terminal) at verbose >= 1."""
        if self.trainer.config.verbose >= 1:
            tqdm.write(text) if not self.bar.disable else click.echo(text)

    def update(self, event) -> None:
        """Advance one step (a ``train.Event``): every ``prog_freq`` steps the progress line and, at
        verbose >= 2, ``agent.report()``; then an evaluation's summary (``train_agent.lua``'s order)."""
        t, c = self.trainer, self.trainer.config
        if not self.learning and t.agent.num_steps > self.learning_after:
            self.learning = True
            self.time_left.start(event.step)
        if event.evaluation is not None:
            self.time_left.evaluated(event.evaluation.eval_time)
        self.bar.update(1)
        if event.step % c.prog_freq == 0:
            self.time_left.report(event.step)
            if self.bar.disable:
                reward = f", last eval reward {self.last_reward}" if self.last_reward is not None else ""
                self.write(f"Steps: {event.step} (frames: {event.step * c.actrep}), "
                           f"{self.rate()} steps/s, ETA {self.eta()}, "
                           f"epsilon {t.agent.train_epsilon():.3f}{reward}")
            if c.verbose >= 2:
                self.write(t.agent.report())
        if event.evaluation is not None:
            self.last_reward = f"{event.evaluation.reward:.2f}"
            self.write(event.evaluation.summary())

    def close(self):
        """Close the bar."""
        self.bar.close()


class _Bar(tqdm):
    """A tqdm bar whose ``bar_format`` may hold ``{figures}``: the string ``figures()`` returns."""

    def __init__(self, figures, **kwargs):
        self.figures = figures
        super().__init__(**kwargs)

    @property
    def format_dict(self):
        """tqdm's, with ``figures``."""
        return {**super().format_dict, "figures": self.figures()}
