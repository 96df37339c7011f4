"""``dqn-train``'s progress: the plain line off a terminal and the tqdm bar on one, whose ETA is
the learning phase's, not random play's (real Pong runs, stopped by SIGINT once learning has
run a little)."""
import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import termios
import time

DQN_TRAIN = shutil.which("dqn-train")
STEPS, LEARN_START = 100_000, 100
# An update every step: learning runs many times slower than random play, as with the paper's
# settings on a CPU. The run is stopped long before its end: the ETA stays in hours.
RUN = ["--game", "pong", "--gpu", "-1", "--threads", "1", "--replay-memory", "2000", "--buffer-size", "64",
       "--valid-size", "50", "--learn-start", LEARN_START, "--update-freq", "1", "--steps", STEPS, "--name", "run",
       "--verbose", "1"]
LINE = re.compile(r"^Steps: (\d+) \(frames: \d+\), ([\d.]+) steps/s, ETA ([^,]+), ")


def seconds(interval: str) -> int:
    """Seconds of a ``tqdm.format_interval`` string, "1:02:03" or "02:03"."""
    value = 0
    for part in interval.split(":"):
        value = 60 * value + int(part)
    return value


def stop(process):
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 128 + signal.SIGINT


def test_the_progress_lines_eta_is_the_learning_phases(tmp_path):
    # Lines every 25 steps: up to 100 random play (ETA unknown), at 125 (after the first
    # evaluation) and 150 learning, whose ETA is the steps left at the learning phase's rate
    # plus the evaluations left at the first one's duration.
    eval_freq, eval_steps = 125, 100
    process = subprocess.Popen([DQN_TRAIN, *map(str, [*RUN, "--prog-freq", 25, "--eval-freq", eval_freq,
                                                          "--eval-steps", eval_steps])], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines, seen = {}, {}
    eval_time = None
    try:
        for text in process.stdout:
            if m := re.search(r"testing rate: (\d+)fps", text):
                eval_time = 4 * eval_steps / int(m[1])  # actrep 4
            if m := LINE.match(text):
                step = int(m[1])
                lines[step], seen[step] = (float(m[2]), m[3]), time.perf_counter()
                if step == 150:
                    break
    finally:
        stop(process)
    assert sorted(lines) == [25, 50, 75, 100, 125, 150] and eval_time is not None
    assert {lines[step][1] for step in (25, 50, 75, 100)} == {"?"}
    for step in (125, 150):
        rate, eta = lines[step]
        evaluations = STEPS // eval_freq - step // eval_freq
        expected = (STEPS - step) / rate + evaluations * eval_time
        assert abs(seconds(eta) - expected) <= 0.01 * expected + 1, (step, rate, eta, eval_time)
    learning = lines[150][0]
    assert lines[100][0] > 2 * learning  # random play's rate is not the learning phase's
    # steps 126 to 150, timed here: the learning phase's rate, which the line gives
    assert 0.5 < learning / (25 / (seen[150] - seen[125])) < 2, lines


def test_the_bars_eta_is_the_learning_phases(tmp_path):
    # On a terminal, the bar's ETA is unknown ("?") during random play, then the steps left at
    # the learning phase's rate (no evaluation comes before the run's end).
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
    process = subprocess.Popen([DQN_TRAIN, *map(str, [*RUN, "--eval-freq", STEPS])], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    renders, output, learning = {}, "", []
    try:  # until two renders 20 steps apart once learning has run 10 steps (tqdm skips renders)
        while len(learning) < 2 or learning[-1] - learning[0] < 20:
            assert select.select([master], [], [], 60)[0], "no output from dqn-train for 60 s"
            try:
                output += os.read(master, 65536).decode(errors="replace")
            except OSError:  # the run ended
                raise AssertionError(output[-2000:]) from None
            for step, inside in re.findall(rf"\| (\d+)/{STEPS} \[([^\]]*)\]", output):
                eta = re.match(r"[\d:]+, ETA ([^,]+),", inside)
                renders.setdefault(int(step), (eta and eta[1], time.perf_counter()))
            learning = sorted(step for step in renders if step > LEARN_START + 10)
    finally:
        stop(process)
        os.close(master)
    random_play = [eta for step, (eta, _) in renders.items() if step <= LEARN_START]
    assert random_play and set(random_play) == {"?"}
    (_, start), (eta, end) = renders[learning[0]], renders[learning[-1]]
    expected = (STEPS - learning[-1]) * (end - start) / (learning[-1] - learning[0])  # at the rate timed here
    assert 0.5 * expected < seconds(eta) < 2 * expected, (eta, expected)
