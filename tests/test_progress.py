"""``dqn-train``'s progress: the time left (``TimeLeft``, on a fake clock), the plain line off a
terminal and the tqdm bar on one (real Pong runs, stopped by SIGINT once learning has run a
little)."""
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios

import pytest

from dqn_nature.progress import TimeLeft
from helpers import DQN_TRAIN



class Clock:
    """A fake monotonic clock, seconds, moved on by the test."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def time_left(clock, **kwargs):
    """A run of 10,000 steps evaluated every 1,000 after step 500, for 200 steps."""
    return TimeLeft(**{"steps": 10_000, "eval_freq": 1000, "eval_steps": 200, "learn_start": 500, "clock": clock,
                       **kwargs})


def test_the_time_left_is_the_steps_left_at_the_rate_plus_the_evaluations_left():
    clock = Clock()
    eta = time_left(clock)
    assert eta.rate() is None and eta.seconds(0) is None  # nothing measured yet
    clock.now += 20  # steps 0 to 1000 at 0.02 s each, then an evaluation of 30 s
    eta.evaluated(30)
    clock.now += 30
    eta.report(1000)
    assert eta.rate() == pytest.approx(50)  # the evaluation is no training time
    assert eta.seconds(1000) == pytest.approx(9000 * 0.02 + 9 * 30)  # evaluations at 2000 ... 10000


def test_before_an_evaluation_one_counts_as_long_as_its_steps_of_training():
    # After a resume, as at the start: not the optimistic "no evaluation at all".
    clock = Clock()
    eta = time_left(clock)
    eta.start(4500)
    clock.now += 10
    eta.report(5000)
    assert eta.seconds(5000) == pytest.approx(5000 * 0.02 + 5 * 200 * 0.02)


def test_one_slow_interval_moves_the_rate_by_its_weight_only():
    clock = Clock()
    eta = time_left(clock, weight=0.1)
    for step in range(1000, 5001, 1000):
        clock.now += 20
        eta.report(step)
    assert eta.seconds(5000) == pytest.approx(5000 * 0.02 + 5 * 200 * 0.02)
    clock.now += 120  # another program takes the cores for a while: 0.12 s a step
    eta.report(6000)
    assert 1 / eta.rate() == pytest.approx(0.02 + 0.1 * (0.12 - 0.02))
    evaluations = [25, 35]
    for step, seconds in zip((7000, 8000), evaluations):
        eta.evaluated(seconds)
        clock.now += seconds + 20
        eta.report(step)
    assert eta.eval_seconds == pytest.approx(25 + 0.1 * (35 - 25))


def test_a_new_phase_forgets_the_rate_of_the_last():
    clock = Clock()
    eta = time_left(clock)
    clock.now += 1  # random play: 0.002 s a step
    eta.report(500)
    eta.start(500)  # learning starts
    assert eta.rate() is None
    clock.now += 5
    eta.report(600)
    assert eta.rate() == pytest.approx(20)


# -- real runs ------------------------------------------------------------------------------

STEPS, LEARN_START = 100_000, 100
# An update every step: learning runs many times slower than random play, as with the paper's
# settings on a CPU. The run is stopped long before its end.
RUN = ["--game", "pong", "--gpu", "-1", "--threads", "1", "--replay-memory", "2000", "--buffer-size", "64",
       "--valid-size", "50", "--learn-start", LEARN_START, "--update-freq", "1", "--steps", STEPS, "--name", "run"]
LINE = re.compile(r"^Steps: (\d+) \(frames: (\d+)\), (\?|\d+\.\d) steps/s, ETA (\?|\d+:\d\d(?::\d\d)?), "
                  r"epsilon \d\.\d{3}(, last eval reward -?\d+\.\d\d)?$")


def stop(process):
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 128 + signal.SIGINT


def test_the_progress_line(tmp_path):
    # Lines every 25 steps: up to 100 random play (ETA unknown), then learning; the evaluation
    # at step 125 gives the lines after it their reward.
    process = subprocess.Popen([DQN_TRAIN, *map(str, [*RUN, "--verbose", 1, "--prog-freq", 25, "--eval-freq", 125,
                                                          "--eval-steps", 50])],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = {}
    try:
        for text in process.stdout:
            if text.startswith("Steps: ") and "steps/s" in text:
                m = LINE.match(text.rstrip("\n"))
                assert m, text
                lines[int(m[1])] = m
                if int(m[1]) == 175:
                    break
    finally:
        stop(process)
    assert sorted(lines) == [25, 50, 75, 100, 125, 150, 175]
    assert all(int(m[2]) == 4 * step for step, m in lines.items())  # frames, a plain integer
    assert {lines[step][4] for step in (25, 50, 75, 100)} == {"?"}  # random play
    assert all(lines[step][4] != "?" for step in (150, 175))  # the learning phase, measured
    assert [step for step, m in lines.items() if m[5]] == [150, 175]  # no reward before an evaluation


def test_the_bar_is_one_line_with_the_reports_above_it(tmp_path):
    # On a terminal 100 columns wide, at verbose 2: the weight reports print above the bar,
    # which never takes more than one line and shows no reward before the first evaluation.
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen([DQN_TRAIN, *map(str, [*RUN, "--verbose", 2, "--prog-freq", 50,
                                                          "--eval-freq", STEPS])],
                               cwd=tmp_path, stdout=slave, stderr=slave)
    os.close(slave)
    output = ""
    try:  # until the bar shows an ETA once learning has been measured
        while not re.search(r"ETA \d+:\d\d", output):
            assert select.select([master], [], [], 60)[0], "no output from dqn-train for 60 s"
            try:
                output += os.read(master, 65536).decode(errors="replace")
            except OSError:  # the run ended
                raise AssertionError(output[-2000:]) from None
    finally:
        stop(process)
        os.close(master)
    pieces = [piece for piece in re.split(r"[\r\n]", output) if piece.strip()]
    bars = [piece for piece in pieces if f"/{STEPS} [" in piece]
    reports = [piece for piece in pieces if piece.startswith("Weight norms:")]
    assert bars and reports
    assert all(len(bar) <= 100 for bar in bars), max(bars, key=len)
    assert not any("Weight" in bar or "nn.Sequential" in bar for bar in bars)
    assert re.search(rf"\| \d+/{STEPS} \[[\d:]+, ETA \?, \d+\.\d steps/s, frames \d+, epsilon 1\.000\]", output)
    assert not any("reward" in bar or "None" in bar for bar in bars)
