"""Long runs survive (issue 5): checkpoints and ``--resume``, SIGKILL at random moments and
during saves, SIGINT and SIGTERM, damaged files and a full disk, with real ``dqn-train``
processes and real signals on the real emulator."""
import csv
import fcntl
import glob
import os
import random
import resource
import select
import shutil
import signal
import subprocess
import termios
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from dqn_nature import load_history
from dqn_nature.checkpoint import read_header
from dqn_nature.environment import rom_path
from dqn_nature.history import HistoryError
from helpers import DQN_TRAIN, dqn_train, finish, start

# One torch thread, tiny memories and minibatches: a step costs little and learning starts at step 100.
TINY = ["--game", "pong", "--gpu", -1, "--threads", 1, "--verbose", 0, "--replay-memory", 2000,
        "--buffer-size", 64, "--valid-size", 50, "--learn-start", 100, "--minibatch-size", 8,
        "--update-freq", 4, "--target-q", 150, "--eval-steps", 100]
# Saves and checkpoints every 100 steps, evaluations at 200 and 300; replay memory in the checkpoints.
EXACT = [*TINY, "--steps", 300, "--eval-freq", 100, "--save-freq", 100, "--checkpoint-replay", "--name", "run"]
# Saves and checkpoints (without the replay memory) every 100 steps, and no end in sight.
ENDLESS = [*TINY, "--steps", 100_000, "--eval-freq", 300, "--save-freq", 100, "--checkpoint-freq", 100,
           "--name", "run"]








def wait_for(proc, condition, timeout=120):
    """Poll ``condition()`` every 2 ms while ``proc`` runs; fail if it never holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, finish(proc).stderr
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def temporaries(folder):
    return glob.glob(os.path.join(folder, ".*.tmp*"))


def inode(path):
    """Each atomic rewrite of ``path`` gives it a new inode; None while it does not exist."""
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def checkpoint_step(path):
    with h5py.File(path) as f:
        return int(f.attrs["step"])


def read_everything(path):
    """Every attribute and dataset of an HDF5 file: a damaged one raises here."""
    values = {}
    with h5py.File(path) as f:
        values.update(f.attrs)
        f.visititems(lambda name, item: values.update(
            {name: item[()] if isinstance(item, h5py.Dataset) else dict(item.attrs)}))
    return values


def check_loadable(folder):
    """Every file under a real name loads in full; returns the names."""
    names = sorted(p.name for p in Path(folder).iterdir() if not p.name.startswith("."))
    for name in names:
        path = os.path.join(folder, name)
        if name.endswith(".h5"):
            history = load_history(path)
            history.load_network("model")
        elif name.endswith(".ckpt"):
            assert read_header(path)[0]["game"] == "pong"
        read_everything(path)
    return names


def outcome(path):
    """What a run produced: every history but time_history (which holds wall-clock times),
    and the model and best model weights."""
    with h5py.File(path) as f:
        return {name: f[name][()] for group in ("history", "model", "best_model") for name in
                (f"{group}/{k}" for k in f[group]) if name != "history/time_history"}


def assert_same_outcome(path, expected):
    got, want = outcome(path), outcome(expected)
    assert sorted(got) == sorted(want)
    for name in want:  # bit for bit; NaN equals NaN
        assert got[name].dtype == want[name].dtype and got[name].tobytes() == want[name].tobytes(), name


def one_line(text):
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# -- resume equality -----------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs side by side: uninterrupted; stopped at its step-200 checkpoint (--steps 200);
    interrupted by SIGINT right after its step-200 checkpoint (its second)."""
    folders = {k: tmp_path_factory.mktemp(k) for k in ("straight", "stopped", "interrupted")}
    procs = {"straight": start(folders["straight"], *EXACT),
             "stopped": start(folders["stopped"], *EXACT, "--steps", 200),
             "interrupted": start(folders["interrupted"], *EXACT)}
    interrupted = procs["interrupted"]
    wait_for(interrupted, lambda: os.path.exists(folders["interrupted"] / "run.ckpt"))
    first = inode(folders["interrupted"] / "run.ckpt")
    wait_for(interrupted, lambda: inode(folders["interrupted"] / "run.ckpt") != first)
    interrupted.send_signal(signal.SIGINT)
    results = {k: finish(p) for k, p in procs.items()}
    return folders, results


def test_sigint_stops_after_the_current_step(runs):
    folders, results = runs
    result, folder = results["interrupted"], folders["interrupted"]
    assert result.returncode == 130, result.stderr
    step = checkpoint_step(folder / "run.ckpt")
    assert 200 <= step < 300
    assert load_history(str(folder / "run.h5")).steps == step
    line = one_line(result.stderr)
    assert line.startswith(f"Stopped by SIGINT at step {step}: history run.h5, checkpoint run.ckpt")
    assert line.endswith("Resume with: dqn-train --resume run.ckpt")
    assert check_loadable(folder) == ["run.ckpt", "run.h5"] and not temporaries(folder)


def test_resume_equals_the_uninterrupted_run(runs):
    folders, results = runs
    assert all(r.returncode in (0, 130) for r in results.values()), [r.stderr for r in results.values()]
    assert checkpoint_step(folders["stopped"] / "run.ckpt") == 200
    # Resumed side by side: the run name, or the .ckpt path; --steps and output options may change.
    procs = {"stopped": start(folders["stopped"], "--resume", "run", "--steps", 300, "--verbose", 1,
                              "--prog-freq", 250, "--threads", 1, "--game", "pong"),
             "interrupted": start(folders["interrupted"], "--resume", "run.ckpt")}
    step = checkpoint_step(folders["interrupted"] / "run.ckpt")
    for key, at in (("stopped", 200), ("interrupted", step)):
        result = finish(procs[key])
        assert result.returncode == 0, result.stderr
        assert f"Resumed run.ckpt at step {at}; replay memory restored" in result.stdout
        assert load_history(str(folders[key] / "run.h5")).steps == 300
        assert_same_outcome(folders[key] / "run.h5", folders["straight"] / "run.h5")
        if key == "stopped":  # its progress line before the next evaluation shows the evaluation before the stop
            reward = load_history(str(folders[key] / "run.h5")).reward_history[0]
            assert "Steps: 250 (frames: 1000), " in result.stdout
            assert f"last eval reward {reward:.2f}\n" in result.stdout
    np.testing.assert_array_equal(load_history(str(folders["straight"] / "run.h5")).step_history, [200, 300])


def test_a_bf16_run_resumes_exactly_too(tmp_path):
    # bf16 on the CPU: autocast's forward and backward passes, float32 weights and RMSProp.
    folders = {k: tmp_path / k for k in ("straight", "stopped")}
    for key, extra in (("straight", []), ("stopped", ["--steps", 200])):
        folders[key].mkdir()
        result = dqn_train(folders[key], *EXACT, "--precision", "bf16", *extra)
        assert result.returncode == 0, result.stderr
    result = dqn_train(folders["stopped"], "--resume", "run", "--steps", 300)
    assert result.returncode == 0, result.stderr
    assert "Resumed run.ckpt at step 200; replay memory restored" in result.stdout
    assert load_history(str(folders["stopped"] / "run.h5")).steps == 300
    assert_same_outcome(folders["stopped"] / "run.h5", folders["straight"] / "run.h5")


def test_a_run_of_the_removed_overlap_updates_option_loads_and_resumes(tmp_path, runs):
    # A checkpoint and a history written with --overlap-updates (an option of earlier versions,
    # stored in their arguments): the history loads, and the resumed run says in one line that it
    # goes on with the plain update, which gives the overlapped updates' bits on one thread.
    folders, _ = runs
    result = dqn_train(tmp_path, *EXACT, "--steps", 200)
    assert result.returncode == 0, result.stderr
    for name in ("run.ckpt", "run.h5"):
        with h5py.File(tmp_path / name, "r+") as f:
            f["arguments"].attrs["overlap_updates"] = True
    assert load_history(str(tmp_path / "run.h5")).steps == 200
    result = dqn_train(tmp_path, "--resume", "run", "--steps", 300)
    assert result.returncode == 0, result.stderr
    assert one_line(result.stderr) == ("overlap_updates is no longer an option: this run continues with the plain "
                                       "update, the same arithmetic (bit for bit with --threads 1)")
    with h5py.File(tmp_path / "run.h5") as f:
        assert "overlap_updates" not in f["arguments"].attrs
    assert_same_outcome(tmp_path / "run.h5", folders["straight"] / "run.h5")


# -- SIGKILL at random moments ---------------------------------------------------------

def test_sigkill_at_random_moments_and_during_saves(tmp_path):
    rng = random.Random(5)
    previous, last, killed_in_save = 0, None, 0
    for attempt, moment in enumerate(("save", "random", "save")):
        proc = start(tmp_path, *(ENDLESS if attempt == 0 else ["--resume", "run"]))
        # A new checkpoint shows that this process restored the last one and went on.
        wait_for(proc, lambda last=last: inode(tmp_path / "run.ckpt") not in (None, last))
        before = set(temporaries(tmp_path))
        if moment == "random":
            time.sleep(rng.uniform(0, 1.5))
        else:
            wait_for(proc, lambda before=before: set(temporaries(tmp_path)) - before)
        proc.kill()
        finish(proc)
        killed_in_save += bool(set(temporaries(tmp_path)) - before)
        assert check_loadable(tmp_path) == ["run.ckpt", "run.h5"]
        step = checkpoint_step(tmp_path / "run.ckpt")
        assert step >= previous + 100 and step % 100 == 0
        assert load_history(str(tmp_path / "run.h5")).steps in (step, step + 100)
        previous, last = step, inode(tmp_path / "run.ckpt")
    assert killed_in_save >= 1  # at least one kill hit a file being written
    result = dqn_train(tmp_path, "--resume", "run", "--steps", previous + 100)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Resumed run.ckpt at step {previous}; replay memory empty: "
                                    "learning resumes after 100 steps")
    assert (f"before learning resumes at step {previous + 105} (--learn-start steps refill the empty replay "
            "memory): the network is not trained further") in result.stderr
    assert load_history(str(tmp_path / "run.h5")).steps == previous + 100
    assert checkpoint_step(tmp_path / "run.ckpt") == previous + 100
    assert not temporaries(tmp_path)  # those of the killed processes are gone with the next writes


def test_a_resume_after_a_kill_drops_the_log_rows_it_writes_again(tmp_path):
    def logged_steps():
        with open(tmp_path / "log.csv") as fh:
            return [int(row["step"]) for row in csv.DictReader(fh)]

    proc = start(tmp_path, *TINY, "--steps", 100_000, "--eval-freq", 100, "--eval-steps", 20, "--save-freq", 100,
                 "--checkpoint-freq", 200, "--csv-log", "log.csv", "--name", "run")
    wait_for(proc, lambda: os.path.exists(tmp_path / "log.csv") and 300 in logged_steps())
    proc.kill()
    finish(proc)
    assert checkpoint_step(tmp_path / "run.ckpt") == 200 and logged_steps()[-1] >= 300
    result = dqn_train(tmp_path, "--resume", "run", "--steps", 400)
    assert result.returncode == 0, result.stderr
    assert logged_steps() == list(load_history(str(tmp_path / "run.h5")).step_history) == [200, 300, 400]


# -- SIGTERM, and a second signal -----------------------------------------------------------

def test_sigterm_writes_and_resumes(tmp_path):
    proc = start(tmp_path, *ENDLESS)
    wait_for(proc, lambda: os.path.exists(tmp_path / "run.ckpt"))
    proc.send_signal(signal.SIGTERM)
    result = finish(proc)
    assert result.returncode == 143, result.stderr
    step = checkpoint_step(tmp_path / "run.ckpt")
    assert step >= 100 and load_history(str(tmp_path / "run.h5")).steps == step
    assert one_line(result.stderr).startswith(f"Stopped by SIGTERM at step {step}")
    assert "Resume with: dqn-train --resume run.ckpt" in result.stderr
    result = dqn_train(tmp_path, "--resume", "run", "--steps", step + 20)
    assert result.returncode == 0, result.stderr
    assert load_history(str(tmp_path / "run.h5")).steps == step + 20


def test_a_closed_terminal_stops_the_run_as_sigterm_does(tmp_path):
    # The run's terminal (its controlling terminal, its stdin and stderr, with the bar) closes, as
    # when an SSH connection drops: the kernel hangs it up and sends SIGHUP. SIGHUP killed the run
    # without a checkpoint; it now writes its files, as for SIGTERM, though its terminal is gone.
    master, slave = os.openpty()
    proc = subprocess.Popen([DQN_TRAIN, *map(str, [*ENDLESS, "--verbose", 1])], cwd=tmp_path, stdin=slave,
                            stdout=subprocess.DEVNULL, stderr=slave, start_new_session=True,
                            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    os.close(slave)
    try:
        def checkpointed():
            if select.select([master], [], [], 0.01)[0]:  # read what the bar writes, lest the terminal fill
                os.read(master, 65536)
            return os.path.exists(tmp_path / "run.ckpt")

        wait_for(proc, checkpointed)
    finally:
        os.close(master)
    assert proc.wait(timeout=120) == 128 + signal.SIGHUP
    step = checkpoint_step(tmp_path / "run.ckpt")
    assert step >= 100 and load_history(str(tmp_path / "run.h5")).steps == step
    result = dqn_train(tmp_path, "--resume", "run", "--steps", step + 20)
    assert result.returncode == 0, result.stderr


def test_sigint_during_an_evaluation_says_it_waits_for_its_end(tmp_path):
    # Step 199's progress line comes just before step 200's evaluation of 1,000 steps (seconds).
    proc = start(tmp_path, *TINY, "--steps", 1000, "--eval-freq", 200, "--eval-steps", 1000, "--verbose", 1,
                 "--prog-freq", 199, "--name", "run")
    for line in proc.stdout:
        if line.startswith("Steps: 199 "):
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    result = finish(proc)
    assert result.returncode == 130, result.stderr
    waiting, stopped = result.stderr.splitlines()
    assert waiting.startswith("SIGINT: stopping when the evaluation in progress ends; a second signal exits")
    assert stopped.startswith("Stopped by SIGINT at step 200: ")
    assert load_history(str(tmp_path / "run.h5")).step_history.tolist() == [200]  # the evaluation is kept


def test_second_signal_exits_at_once(tmp_path):
    # The history is only written on the way out: its temporary file shows the first signal at work.
    proc = start(tmp_path, *ENDLESS, "--save-freq", 100_000)
    wait_for(proc, lambda: os.path.exists(tmp_path / "run.ckpt"))
    before = (tmp_path / "run.ckpt").read_bytes()
    proc.send_signal(signal.SIGINT)
    wait_for(proc, lambda: temporaries(tmp_path))
    proc.send_signal(signal.SIGINT)
    result = finish(proc, timeout=10)
    assert result.returncode == 130
    assert "Stopped by" not in result.stderr
    # The checkpoint written before is the one on disk, whole.
    assert check_loadable(tmp_path) == ["run.ckpt"]
    assert (tmp_path / "run.ckpt").read_bytes() == before


# -- damaged and foreign files ------------------------------------------------------------

def damage(source, target, how):
    """Copy ``source`` to ``target`` truncated to half, or with 64 bytes flipped in the middle."""
    data = bytearray(Path(source).read_bytes())
    middle = len(data) // 2
    if how == "truncated":
        del data[middle:]
    else:  # random flips: XOR with 0xFF turns runs of zero bytes into 0xFF, which Fletcher-32 cannot see
        noise = np.random.default_rng(0).integers(1, 256, 64, dtype=np.uint8)
        data[middle:middle + 64] = (np.frombuffer(data[middle:middle + 64], np.uint8) ^ noise).tobytes()
    Path(target).write_bytes(data)


@pytest.mark.parametrize("how", ["truncated", "flipped"])
def test_damaged_history(runs, tmp_path, how):
    path = tmp_path / "damaged.h5"
    damage(runs[0]["straight"] / "run.h5", path, how)
    with pytest.raises(HistoryError, match=str(path)):
        load_history(str(path))


def test_damaged_and_foreign_checkpoints(runs, tmp_path):
    for how in ("truncated", "flipped"):
        damage(runs[0]["straight"] / "run.ckpt", tmp_path / f"{how}.ckpt", how)
    with h5py.File(tmp_path / "foreign.ckpt", "w") as f:
        f["x"] = np.arange(3)
    shutil.copy(runs[0]["straight"] / "run.h5", tmp_path / "history.ckpt")
    shutil.copy(runs[0]["straight"] / "run.ckpt", tmp_path / "incomplete.ckpt")
    with h5py.File(tmp_path / "incomplete.ckpt", "a") as f:  # a sound header: refused by the restore
        del f["state/agent"]
    names = ("truncated.ckpt", "flipped.ckpt", "foreign.ckpt", "history.ckpt", "incomplete.ckpt", "missing.ckpt")
    # Each under its own --name, whose lock it takes once the checkpoint's header is read.
    procs = {name: start(tmp_path, "--resume", name, "--name", Path(name).stem, "--steps", 400, "--verbose", 2)
             for name in names}
    for name, proc in procs.items():
        result = finish(proc)
        assert result.returncode == 2, (name, result.stderr)
        assert name in one_line(result.stderr)
        assert result.stdout == ""  # refused before the arguments are listed
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[:-1])  # nothing written


# -- resume options ---------------------------------------------------------------------

def test_resume_refuses_an_algorithm_change(runs):
    result = dqn_train(runs[0]["stopped"], "--resume", "run", "--lr", 0.001)
    assert result.returncode == 2
    assert one_line(result.stderr).startswith("dqn-train: error: lr cannot change when resuming")


def test_resume_of_a_finished_run_asks_for_more_steps(runs):
    result = dqn_train(runs[0]["straight"], "--resume", "run")
    assert result.returncode == 2
    assert one_line(result.stderr) == ("dqn-train: error: run.ckpt is at step 300 and --steps is 300: nothing to "
                                       "train; give a larger --steps to continue")


def test_a_moved_checkpoint_goes_on_beside_itself_and_keeps_another_runs_files(runs, tmp_path):
    # The --name stored in a checkpoint says where the run was: it goes on beside its checkpoint, wherever that
    # is now and wherever dqn-train starts, unless --name says otherwise.
    shutil.copy(runs[0]["stopped"] / "run.ckpt", tmp_path / "copy.ckpt")  # at step 200, or 300 once resumed
    shutil.copy(runs[0]["straight"] / "run.h5", tmp_path / "run.h5")
    steps = checkpoint_step(tmp_path / "copy.ckpt") + 50
    refused = dqn_train(tmp_path, "--resume", "copy.ckpt", "--steps", steps, "--name", "run")
    assert refused.returncode == 2
    assert one_line(refused.stderr) == ("dqn-train: error: run.h5 exists, from another run than copy.ckpt: replace "
                                        "it with --overwrite, or choose another --name")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = dqn_train(elsewhere, "--resume", tmp_path / "copy.ckpt", "--steps", steps)
    assert result.returncode == 0, result.stderr
    assert checkpoint_step(tmp_path / "copy.ckpt") == load_history(str(tmp_path / "copy.h5")).steps == steps
    assert_same_outcome(tmp_path / "run.h5", runs[0]["straight"] / "run.h5")  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.ckpt", "copy.h5", "elsewhere", "run.h5"]
    assert not any(elsewhere.iterdir())


def test_a_resume_keeps_a_history_of_another_run_under_its_name(tmp_path):
    # The checkpoint under a history's name is another run's (another game, seed, or evaluations):
    # the resumed run replaced that history without a word. A history of the checkpoint's own run
    # that has gone past it (a run killed between its save and its checkpoint) is made again, with a warning.
    short = [*TINY, "--eval-freq", 50, "--eval-steps", 20, "--save-freq", 100, "--name", "run"]
    for folder, extra in (("pong", []), ("breakout", ["--game", "breakout"]), ("seed2", ["--seed", 2])):
        (tmp_path / folder).mkdir()
        result = dqn_train(tmp_path / folder, *short, "--steps", 160, *extra)
        assert result.returncode == 0, result.stderr
    at_160 = (tmp_path / "pong" / "run.ckpt").read_bytes()  # evaluated at 150
    assert dqn_train(tmp_path / "pong", "--resume", "run", "--steps", 210).returncode == 0
    history = (tmp_path / "pong" / "run.h5").read_bytes()  # at step 210, evaluated at 150 and 200
    (tmp_path / "changed").mkdir()
    (tmp_path / "changed" / "run.ckpt").write_bytes(at_160)
    (tmp_path / "changed" / "run.h5").write_bytes(history)
    with h5py.File(tmp_path / "changed" / "run.h5", "r+") as f:  # the evaluation at 150 differs
        f["history/reward_history"][0] = 99
    for folder, problem in (("breakout", "its game is pong, the checkpoint's breakout"),
                            ("seed2", "its seed is 1, the checkpoint's 2"), ("changed", "their evaluations differ")):
        if folder != "changed":
            (tmp_path / folder / "run.h5").write_bytes(history)
        result = dqn_train(tmp_path / folder, "--resume", "run", "--steps", 300)
        assert result.returncode == 2
        assert one_line(result.stderr) == (f"dqn-train: error: run.h5 is not the history of run.ckpt: {problem}; "
                                           "replace it with --overwrite, or resume under another --name")
    assert (tmp_path / "seed2" / "run.h5").read_bytes() == history
    (tmp_path / "pong" / "run.ckpt").write_bytes(at_160)
    result = dqn_train(tmp_path / "pong", "--resume", "run", "--steps", 210)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == ("warning: run.h5 has gone on to step 210, past the checkpoint's: the "
                                             "resumed run makes its later evaluations again")
    assert load_history(str(tmp_path / "pong" / "run.h5")).step_history.tolist() == [150, 200]


def test_a_resume_needs_neither_the_starting_network_nor_the_old_rom_folder(runs, tmp_path):
    shutil.copy(runs[0]["straight"] / "run.h5", tmp_path / "start.h5")
    (tmp_path / "roms").mkdir()
    shutil.copy(rom_path("pong"), tmp_path / "roms" / "pong.bin")
    first = dqn_train(tmp_path, *TINY, "--steps", 120, "--network", "start.h5", "--game-path", "roms", "--name", "r")
    assert first.returncode == 0, first.stderr
    (tmp_path / "start.h5").unlink()  # the checkpoint holds the networks
    (tmp_path / "roms").rename(tmp_path / "moved")
    result = dqn_train(tmp_path, "--resume", "r", "--steps", 150, "--game-path", "moved")
    assert result.returncode == 0, result.stderr
    assert checkpoint_step(tmp_path / "r.ckpt") == 150


# -- a full disk ------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """Mount a tmpfs of ``size`` bytes on a folder (root only, else skip); unmounted afterwards."""
    folder = tmp_path / "disk"
    folder.mkdir()

    def mount(size):
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                                capture_output=True, text=True, check=False)
        if result.returncode:
            pytest.skip(f"cannot mount a tmpfs: {result.stderr.strip()}")
        return folder

    yield mount
    subprocess.run(["umount", str(folder)], capture_output=True, check=False)


@pytest.mark.parametrize("fails", ["history", "checkpoint"])
def test_full_disk_leaves_previous_files_intact(runs, small_disk, fails):
    # The old history holds two networks; at step 100 the run writes a history of one (no best
    # model yet), then a checkpoint of three. Either the new history does not fit beside the old
    # one, or it does and the checkpoint does not.
    old = runs[0]["straight"] / "run.h5"
    network = old.stat().st_size // 2
    disk = small_disk(network * 5 // 2 if fails == "history" else network * 7 // 2)
    shutil.copy(old, disk / "run.h5")
    check_failed_write(dqn_train(disk, *TINY, "--steps", 100, "--save-freq", 100, "--name", "run", "--overwrite"),
                       "No space left on device", disk)
    if fails == "history":
        assert (disk / "run.h5").read_bytes() == old.read_bytes()
    else:
        assert load_history(str(disk / "run.h5")).steps == 100


def test_failed_write_leaves_previous_files_intact(runs, tmp_path):
    # Without root (no tmpfs): a file size limit makes the checkpoint's write fail (EFBIG). The
    # history at step 100 holds one network and fits; the checkpoint holds three and does not.
    old = runs[0]["straight"] / "run.ckpt"
    shutil.copy(old, tmp_path / "run.ckpt")
    limit = (runs[0]["straight"] / "run.h5").stat().st_size // 2 * 3 // 2
    proc = start(tmp_path, *TINY, "--steps", 100, "--save-freq", 100, "--name", "run", "--overwrite",
                 preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    check_failed_write(finish(proc), "File too large", tmp_path, ["run.ckpt", "run.h5"])
    assert (tmp_path / "run.ckpt").read_bytes() == old.read_bytes()


def check_failed_write(result, reason, folder, names=("run.h5",)):
    assert result.returncode == 1, result.stderr
    # These 100-step runs end before learning and before an evaluation, and say so first.
    *warnings, line = result.stderr.strip().splitlines()
    assert len(warnings) == 2 and all(w.startswith("warning: the run ends at step 100, before ") for w in warnings)
    assert line.startswith("dqn-train: error: cannot write output for --name 'run': " + reason)
    assert line.endswith("the files written before are intact")
    assert not temporaries(folder)
    assert check_loadable(folder) == list(names)


def test_checkpoint_between_evaluations_keeps_the_training_time(tmp_path):
    """A stop before any evaluation must not lose the training time done so far."""
    proc = start(tmp_path, *ENDLESS)
    wait_for(proc, lambda: os.path.exists(tmp_path / "run.ckpt"))
    proc.kill()
    proc.wait()
    with h5py.File(tmp_path / "run.ckpt", "r") as f:
        assert f["state"].attrs["step"] >= 100
        assert f["state"].attrs["train_time"] > 0
