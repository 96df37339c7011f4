"""``dqn-train`` end to end on the real emulator: the history file, the original run_gpu
argument string, repeatability, and one clear line on bad input."""
import csv
import errno
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import types
from pathlib import Path

import click
import h5py
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from filelock import FileLock

from dqn_nature import __version__, eval_log, load_history
from dqn_nature.commands.train import config_options, train
from dqn_nature.config import Config, resolve
from dqn_nature.console import fail
from dqn_nature.files import os_reason
from dqn_nature.run_files import resume_path
from dqn_nature.convnet import convnet_atari3
from dqn_nature.train import precision_warning
from helpers import DQN_TRAIN, dqn_train

# One torch thread: on a shared 2-core machine two threads cost three times the CPU time.
CPU = ["--gpu", "-1", "--threads", "1"]
# A small prefetch buffer and validation set let learning start at step 100 (learn_start >= bufferSize).
SHORT = ["--game", "pong", *CPU, "--replay-memory", "2000", "--buffer-size", "64", "--valid-size", "50",
         "--learn-start", "100", "--verbose", "0"]
EVALUATION_LINE = re.compile(r"^Steps: \d+ \(frames: \d+\), reward: ", re.MULTILINE)
HISTORY_DTYPES = {
    "reward_history": np.float64, "reward_counts": np.int64, "episode_counts": np.int64,
    "v_history": np.float64, "td_history": np.float64, "qmax_history": np.float64,
    "step_history": np.int64, "time_history": np.float64,
}
PONG_PARAMS = {k: tuple(v.shape) for k, v in convnet_atari3(6).state_dict().items()}


def tensorboard_events(folder):
    """TensorBoard's reader of the event files under ``folder`` (the test is skipped without
    tensorboard, an optional extra)."""
    reader = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    return reader.EventAccumulator(folder)




def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


def weights(path):
    with h5py.File(path) as f:
        return {k: v[()] for k, v in f["model"].items()}


# -- a short Pong run with one evaluation and one save ---------------------------------

PONG_RUN = ["--game", "pong", *CPU, "--steps", 1000, "--replay-memory", 3000, "--learn-start", 900,
            "--eval-freq", 1000, "--eval-steps", 200, "--save-freq", 1000, "--prog-freq", 500,
            "--name", "out/pong", "--verbose", 1, "--save-network-params", "--csv-log", "logs/pong.csv",
            "--tensorboard", "logs/tb"]  # logs/: a folder the run must create


@pytest.fixture(scope="module")
def pong_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("pong")
    result = dqn_train(cwd, *PONG_RUN)
    assert result.returncode == 0, result.stderr
    return cwd, result


def test_pong_run_output(pong_run):
    cwd, result = pong_run
    assert result.stderr == ""
    assert len(EVALUATION_LINE.findall(result.stdout)) == 1
    evaluation = result.stdout.index("Steps: 1000 (frames: 4000), reward: ")
    # As in train_agent.lua, a step's progress report comes before its evaluation, then the save.
    progress = re.search(r"^Steps: 1000 \(frames: 4000\), [\d.]+ steps/s", result.stdout, re.MULTILINE).start()
    assert progress < evaluation < result.stdout.index("Saved: out/pong.h5")
    assert result.stdout.count("Saved: out/pong.h5") == 1
    assert "  learn_start = 900" in result.stdout  # the resolved arguments are printed
    assert {p for p in files_under(cwd / "out") if p.endswith(".h5")} == {"pong.h5", "pong.params.h5"}


def test_pong_history_layout(pong_run):
    cwd, _ = pong_run
    with h5py.File(cwd / "out/pong.h5") as f:
        assert set(f) == {"history", "model", "best_model", "arguments"}
        attrs = dict(f.attrs)
        assert set(attrs) == {"format", "format_version", "game", "steps", "frames", "package_version"}
        # Text as fixed-length UTF-8, which h5py reads as bytes.
        assert (attrs["format"], attrs["format_version"], attrs["game"]) == (b"dqn_nature.history", 1, b"pong")
        assert (attrs["steps"], attrs["frames"], attrs["package_version"]) == (1000, 4000, __version__.encode())
        assert set(f["history"]) == set(HISTORY_DTYPES)
        for key, dtype in HISTORY_DTYPES.items():
            data = f["history"][key]
            assert data.dtype == dtype, key
            assert data.shape == ((2,) if key == "time_history" else (1,)), key
        for group in ("model", "best_model"):
            assert {k: v.shape for k, v in f[group].items()} == PONG_PARAMS
            assert all(v.dtype == np.float32 and not v.attrs for v in f[group].values())
            assert not f[group].attrs
        assert not f["arguments"].keys()  # options are attributes, nothing else is stored
        assert set(f["arguments"].attrs) == {field.name for field in Config.__dataclass_fields__.values()}


def test_pong_history_values(pong_run):
    cwd, _ = pong_run
    h = load_history(str(cwd / "out/pong.h5"))
    assert (h.game, h.steps, h.frames, h.package_version) == ("pong", 1000, 4000, __version__)
    np.testing.assert_array_equal(h.step_history, [1000])
    np.testing.assert_array_equal(h.qmax_history, [1.0])
    assert h.time_history[0] == 0 and h.time_history[1] > 0
    assert np.isfinite(h.v_history).all() and h.td_history[0] > 0
    # 200 evaluation steps cannot finish a game of Pong (21 points) but see points scored.
    assert h.episode_counts[0] == 0 and h.reward_history[0] == 0 and h.reward_counts[0] > 0
    # Stored arguments are exactly the resolved options.
    explicit = dict(game="pong", gpu=-1, threads=1, steps=1000, replay_memory=3000, learn_start=900,
                    eval_freq=1000, eval_steps=200, save_freq=1000, prog_freq=500, name="out/pong",
                    verbose=1, save_network_params=True, csv_log="logs/pong.csv", tensorboard="logs/tb")
    assert h.arguments == resolve(explicit).as_dict()
    # The only evaluation was at the last step: the best network is the final one.
    model, best = h.state_dict("model"), h.state_dict("best_model")
    assert all(np.array_equal(model[k], best[k]) for k in PONG_PARAMS)


def test_pong_network_params(pong_run):
    cwd, _ = pong_run
    model = load_history(str(cwd / "out/pong.h5")).state_dict("model")
    with h5py.File(cwd / "out/pong.params.h5") as f:
        (flat,) = f.values()
        assert flat.shape == (1_687_206,) and flat.dtype == np.float32
        expected = np.concatenate([model[k].numpy().ravel() for k in PONG_PARAMS])  # parameter order
        np.testing.assert_array_equal(flat[()], expected)


def test_pong_evaluation_logs(pong_run):
    cwd, _ = pong_run
    h = load_history(str(cwd / "out/pong.h5"))
    with open(cwd / "logs/pong.csv", newline="") as f:
        header = f.readline()
        (row,) = csv.DictReader(f, fieldnames=header.rstrip().split(","))
    assert header == ("step,frames,reward_history,reward_counts,episode_counts,v_history,td_history,qmax_history,"
                      "time_history,epsilon,lr,train_fps,eval_fps\r\n")  # the README's order
    row = {k: float(v) for k, v in row.items()}
    assert (row["step"], row["frames"]) == (1000, 4000)
    for key in HISTORY_DTYPES:
        if key != "step_history":
            assert row[key] == getattr(h, key)[-1], key
    # Epsilon anneals from 1 to 0.1 over ep_endt = 1M steps after learn_start = 900.
    assert row["epsilon"] == pytest.approx(0.1 + 0.9 * (1_000_000 - 100) / 1_000_000)
    assert row["lr"] == 0.00025 and row["train_fps"] > 0 and row["eval_fps"] > 0

    events = tensorboard_events(str(cwd / "logs/tb"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(row) - {"step", "frames"}
    for key in events.Tags()["scalars"]:
        assert [(e.step, e.value) for e in events.Scalars(key)] == [(1000, pytest.approx(row[key], rel=1e-6))], key
    assert "arguments/text_summary" in events.Tags()["tensors"]


def test_tensorboard_needs_its_package(tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else
                        find_spec(name, *a))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "1000", "--name", "out/run", "--tensorboard", "tb"])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("pip install 'dqn-nature[tensorboard]'") and files_under(tmp_path) == []


def test_failed_log_write_warns_and_training_goes_on(tmp_path, monkeypatch):
    # A full disk is hard to come by in a test; the CSV writer reports one instead.
    def disk_full(path, row, first):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(eval_log, "append_csv_row", disk_full)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "200", "--eval-freq", "200", "--eval-steps", "50",
                                        "--name", "run", "--csv-log", "run.csv"])
    assert result.exit_code == 0, result.output
    assert result.stderr == "warning: evaluation at step 200 not logged (No space left on device); " \
                            "the history file keeps its figures\n"
    assert len(load_history(str(tmp_path / "run.h5")).reward_history) == 1


def test_a_csv_log_to_stdout_goes_through_a_pipe(tmp_path):
    result = dqn_train(tmp_path, *SHORT, "--steps", 200, "--eval-freq", 200, "--eval-steps", 20, "--name", "run",
                       "--csv-log", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    header, row = [line for line in result.stdout.splitlines() if "," in line]
    assert header == ",".join(eval_log.CSV_COLUMNS) and row.startswith("200,800,")


@pytest.mark.parametrize("earlier, args", [("run.h5", []), ("run.ckpt", []), ("run_3.h5", ["--save-versions", "5"])])
def test_an_earlier_run_is_kept_unless_overwrite(tmp_path, monkeypatch, earlier, args):
    monkeypatch.chdir(tmp_path)
    (tmp_path / earlier).write_bytes(b"an earlier run")
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "run", *args])
    assert result.exit_code == 2
    resumable = "continue it with --resume run, " if earlier == "run.ckpt" else ""  # only a checkpoint resumes
    assert result.stderr.endswith(f"error: {earlier} exists, from an earlier run: {resumable}replace it with "
                                  "--overwrite, or choose another --name\n")
    assert files_under(tmp_path) == [earlier] and (tmp_path / earlier).read_bytes() == b"an earlier run"
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "run", *args, "--overwrite"])
    assert result.exit_code == 0, result.output
    assert load_history(str(tmp_path / ("run_2.h5" if args else "run.h5"))).steps == 10
    # A numbered history the new run does not write again (10 // 5 = 2, not 3) stays, said so.
    said = [line for line in result.stderr.splitlines() if "numbered histories" in line]
    assert said == (["warning: the earlier run's numbered histories (run_3.h5) stay until this run writes the same "
                     "numbers: --overwrite replaces files as they are written"] if args else [])
    assert (tmp_path / "run_3.h5").exists() == bool(args)


def test_a_running_run_is_not_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with FileLock(str(tmp_path / ".run.lock")):  # as a dqn-train running under --name run holds it
        result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "run"])
    assert result.exit_code == 2
    assert result.stderr.endswith("error: another dqn-train is running under --name run (it holds "
                                  ".run.lock); wait for it or choose another --name\n")
    assert files_under(tmp_path) == [".run.lock"]
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "run"])
    assert result.exit_code == 0, result.output
    assert files_under(tmp_path) == ["run.ckpt", "run.h5"]  # the lock is gone with its run


def test_save_versions_and_no_best_model_before_evaluation(tmp_path):
    # No step is past learn_start: no evaluation, two saves, numbered by step // save_versions.
    result = dqn_train(tmp_path, *SHORT, "--steps", 100, "--eval-freq", 100, "--save-freq", 50,
                       "--save-versions", 50, "--name", "v")
    assert result.returncode == 0, result.stderr
    h5 = [p for p in files_under(tmp_path) if p.endswith(".h5")]
    assert h5 == ["v_1.h5", "v_2.h5"]
    for path, steps in (("v_1.h5", 50), ("v_2.h5", 100)):
        h = load_history(str(tmp_path / path))
        assert (h.steps, h.frames) == (steps, 4 * steps)
        assert h.step_history.size == 0 and list(h.time_history) == [0.0]
        with h5py.File(tmp_path / path) as f:
            assert "model" in f and "best_model" not in f


# -- the original run_gpu argument string, verbatim ------------------------------------

RUN_GPU_ARGS = (
    '-framework alewrap -game_path roms/ -name DQN3_0_1_pong_FULL_Y -env pong -env_params useRGB=true '
    '-agent NeuralQLearner -agent_params lr=0.00025,ep=1,ep_end=0.1,ep_endt=1000000,discount=0.99,hist_len=4,'
    'learn_start=600,replay_memory=2000,update_freq=4,n_replay=1,network="convnet_atari3",'
    'preproc="net_downsample_2x_full_y",state_dim=7056,minibatch_size=32,rescale_r=1,ncols=1,bufferSize=512,'
    'valid_size=500,target_q=10000,clip_delta=1,min_reward=-1,max_reward=1 -steps 700 -eval_freq 650 '
    '-eval_steps 50 -prog_freq 350 -save_freq 700 -actrep 4 -gpu 0 -random_starts 30 '
    '-pool_frms type="max",size=2 -seed 1 -threads 4')


def test_run_gpu_arguments_verbatim(tmp_path):
    # A checkout's roms/ folder holds no ROM: ale-py's is played, and one line says so.
    (tmp_path / "roms").mkdir()
    # As the shell passes them: quotes removed (type="max" arrives as type=max).
    result = dqn_train(tmp_path, *RUN_GPU_ARGS.replace('"', "").split())
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1] == ("warning: no ROM file 'roms/pong.bin' in --game-path 'roms/': using the pong ROM that "
                         "ale-py ships")
    if torch.cuda.is_available():
        assert len(lines) == 1 and "Device: cuda:0" in result.stdout
    else:  # --gpu 0 without CUDA: one warning, then the CPU
        assert len(lines) == 2 and "CUDA" in lines[0]
        assert "Device: cpu" in result.stdout
    assert len(EVALUATION_LINE.findall(result.stdout)) == 1
    h = load_history(str(tmp_path / "DQN3_0_1_pong_FULL_Y.h5"))
    a = h.arguments
    assert (a["game"], a["game_path"], a["learn_start"], a["replay_memory"]) == ("pong", "roms/", 600, 2000)
    assert (a["pool_type"], a["pool_size"], a["eval_freq"], a["eval_steps"], a["prog_freq"]) == ("max", 2, 650, 50, 350)
    assert (a["gpu"], a["threads"], a["actrep"], a["random_starts"], a["rescale_r"]) == (0, 4, 4, 30, True)
    assert (h.steps, list(h.step_history)) == (700, [650])


# -- repeatability ---------------------------------------------------------------------

def test_same_seed_same_history_other_seed_differs(tmp_path):
    args = [*SHORT, "--steps", 140, "--eval-freq", 140, "--eval-steps", 50, "--save-freq", 140]  # 10 updates
    # d: --precision tf32 is a CUDA mode; on the CPU it warns and computes in fp32, as a.
    runs = {name: subprocess.Popen([DQN_TRAIN, *map(str, args), "--seed", seed, "--name", name, *extra],
                                   cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for name, seed, extra in (("a", "1", []), ("b", "1", []), ("c", "2", []),
                                      ("d", "1", ["--precision", "tf32"]))}
    stderr = {name: run.communicate(timeout=600)[1] for name, run in runs.items()}
    assert [run.returncode for run in runs.values()] == [0, 0, 0, 0], stderr
    assert stderr["d"] == "warning: --precision tf32 is a CUDA mode; computing in fp32 on the CPU\n"
    a, b, c = (load_history(str(tmp_path / f"{name}.h5")) for name in "abc")
    for key in ("reward_history", "reward_counts", "episode_counts", "v_history", "td_history", "step_history"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    wa, wb, wc, wd = (weights(tmp_path / f"{name}.h5") for name in "abcd")
    assert all(np.array_equal(wa[k], wb[k]) and np.array_equal(wa[k], wd[k]) for k in PONG_PARAMS)
    assert not any(np.array_equal(wa[k], wc[k]) for k in PONG_PARAMS if k.endswith("weight"))
    assert a.v_history[0] != c.v_history[0]


# -- bad input: one line on stderr, exit status 2, no file written ----------------------

BAD_INPUTS = [
    (["--game", "pongg"], r"pongg.*\bpong\b"),  # close ROM ids are suggested
    (["--agent-params", "lr=0.1,,ep=1"], "lr=0.1,,ep=1"),
    (["--pool-frms", "type=max,size"], "size"),
    (["--agent-params", "lr=0.1,lrate=2"], "lrate"),
    (["--steps", "0"], "steps"),
    (["--actrep", "0"], "actrep"),
    (["--eval-freq", "0"], "eval_freq"),
    (["--save-freq", "-1"], "save_freq"),
    (["--minibatch-size", "64"], "minibatch_size"),  # = bufferSize
    (["--replay-memory", "100000000000"], "replay memory"),
    (["--hist-len", "1000000", "--learn-start", "2000000", "--replay-memory", "3000000"],
     "of 1000000-frame states needs"),  # the minibatch buffers' 2 x 64 states count
    (["--name", "c" * 250], "the files' names would be too long; give a base name of at most 228 bytes"),
    (["--name", "/proc/x/run"], "/proc/x"),
    (["--name", "/sys/run"], "cannot write output files in '/sys' \\(from --name '/sys/run'\\): Permission denied"),
    (["--csv-log", "/proc/x/log.csv"], "--csv-log '/proc/x/log.csv'"),
    (["--csv-log", "emptyroms"], "'emptyroms' is a folder"),
    (["--csv-log", "logs/"], "'logs/' is a folder"),
    (["--tensorboard", "/sys/tb"], "--tensorboard '/sys/tb'"),
    (["--seed", "-1"], r"seed must be in \[0, 2\^31\), not -1"),
    (["--seed", "99999999999"], "seed must be in"),
    (["--lr-endt", "99999999999999999999999"], r"lr_endt is out of range \(\|value\| < 2\^63"),  # not at the first save
    (["--name", "afile/run"], "'afile/run'\\): '.*afile' is a file"),
    (["--csv-log", "afile/log.csv"], "'.*afile' is a file"),
    (["--csv-log", "/dev/full"], "'/dev/full' exists and it is not a regular file"),  # not read without end
    (["--csv-log", "out/../out/run.h5"], "'out/../out/run.h5' is one of the run's own files"),
    (["--csv-log", "c" * 240 + ".csv"], "its temporary's name would be too long"),
    (["--hist-len", "100"], r"hist_len \(100\) must be below learn_start \(100\)"),
    (["--lr", "nan"], "lr must be a finite number, not nan"),
    (["--clip-delta", "inf"], "clip_delta must be a finite number"),
    # beyond float32, where the agent computes: each failed the first update with a traceback
    (["--lr", "1e39"], r"lr is out of range \(\|value\| <= 3.402823e\+38, float32's largest\): 1e\+39"),
    (["--agent-params", "wc=1e300"], "wc is out of range"),
    (["--clip-delta", "1e39"], "clip_delta is out of range"),
    (["--lr-end", "1e300", "--lr-endt", "1"], "lr_end is out of range"),
    (["--agent-params", "lr_end=-1"], "lr_end must not be negative"),
    (["--gpu", "-7"], "gpu must be -1"),
    (["--verbose", "-3"], "verbose must not be negative"),
    (["--name", "out/"], "--name 'out/': give a base name"),
    # not UTF-8 (as a shell passes the bytes 0xff 0xfe): these failed at the first save, the steps before it lost
    (["--name", "run\udcff\udcfe"], r"--name 'run\\udcff\\udcfe' is not valid UTF-8"),
    (["--csv-log", "log\udcff.csv"], r"--csv-log 'log\\udcff.csv' is not valid UTF-8"),
    (["--name", "run.h5"], "--name 'run.h5': give a base name"),
]


@pytest.mark.parametrize("args, value", [([], None), (["--checkpoint-replay"], True), (["-checkpoint_replay"], True),
                                         (["--no-checkpoint-replay"], False)])
def test_a_flag_can_be_switched_off_as_when_resuming(args, value):
    given = {}
    command = click.command()(config_options(lambda **values: given.update(values)))
    assert CliRunner().invoke(command, args).exit_code == 0
    assert given["checkpoint_replay"] is value


@pytest.mark.parametrize("args, named", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input(tmp_path, monkeypatch, args, named):
    # In-process (the console script's start-up costs seconds); test_bad_input_console_script runs one for real.
    (tmp_path / "emptyroms").mkdir()
    (tmp_path / "afile").write_text("")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "1000", "--name", "out/run", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "error" in lines[0] and re.search(named, lines[0]), result.stderr
    assert files_under(tmp_path) == ["afile", "emptyroms"]


def test_an_empty_resume_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, ["--resume", ""])
    assert result.exit_code == 2 and result.stderr.endswith(
        "error: --resume: give the run's checkpoint, name or .h5 history\n")  # not "no game given"


def test_resume_takes_a_checkpoint_a_run_name_or_its_history(tmp_path, monkeypatch):
    assert {resume_path(p) for p in ("runs/a", "runs/a.ckpt", "runs/a.h5")} == {"runs/a.ckpt"}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.ckpt").write_bytes(b"")  # a --save-versions run: run_1.h5, run_2.h5 ... and run.ckpt
    assert resume_path("run_2.h5") == "run.ckpt"
    assert [resume_path(p) for p in ("run_2", "run_x.h5", "run2.h5")] == ["run_2.ckpt", "run_x.ckpt", "run2.ckpt"]
    (tmp_path / "run_2.ckpt").write_bytes(b"")  # a run named run_2 has its own checkpoint
    assert resume_path("run_2.h5") == "run_2.ckpt"


@pytest.mark.parametrize("folder, args", [
    ("run.h5", []), ("run.ckpt", []),
    # these were met at the first save (exit 1, the steps before it lost), or as the lock was taken (a traceback)
    ("run.params.h5", ["--save-network-params"]), ("run_1.h5", ["--save-versions", "5"]),
    ("run_1.params.h5", ["--save-versions", "5", "--save-network-params"]), (".run.lock", []),
    ("run_2.h5", ["--save-versions", "5"]),  # the run's last number: 10 // 5
    ("run.params.h5", ["-saveNetworkParams"])])
def test_an_output_name_that_is_a_folder(tmp_path, monkeypatch, folder, args):
    (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--save-freq", "5", "--name", "run", *args])
    assert result.exit_code == 2 and result.stderr.endswith(f"error: {folder} is a folder; choose another --name\n")
    assert files_under(tmp_path) == [folder]


LUA_SPELLINGS = [
    (["-agent_params", "minibatch_size=64"], r"minibatch_size \(64\) must be smaller than bufferSize \(64\)"),
    (["-pool_frms", "type=max,size=0"], "pool_size must be positive, not 0"),
    (["-args", "mine"], "actrep must be positive, not 0"),  # args/mine.toml
    (["-actrep", "0"], "actrep must be positive, not 0"),
    (["-bufferSize", "32", "--minibatch-size", "32"], r"must be smaller than bufferSize \(32\)"),
    (["-env", "pongg"], "pongg"),
    (["-ep_endt", "0"], "ep_endt must be positive"),
]


@pytest.mark.parametrize("args, named", LUA_SPELLINGS, ids=[" ".join(a) for a, _ in LUA_SPELLINGS])
def test_lua_spellings_reach_their_options(tmp_path, monkeypatch, args, named):
    (tmp_path / "args").mkdir()
    (tmp_path / "args" / "mine.toml").write_text("actrep = 0\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "1000", "--name", "run", *args])
    assert result.exit_code == 2 and re.search("error: .*" + named, result.stderr), result.stderr


def test_best_without_network_is_a_warning(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "run", "--best"])
    assert result.exit_code == 0, result.stderr
    assert "warning: --best has no effect without --network" in result.stderr
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "again", "--best", "--network", "run.h5"])
    # run.h5 was never evaluated
    assert result.exit_code == 2 and "has no effect" not in result.stderr
    assert result.stderr.endswith("error: run.h5 holds only its last network (model): leave out --best to start from it\n")
    shutil.copy("run.h5", "slim.h5")
    with h5py.File("slim.h5", "a") as f:  # as a dqn-slim copy holding only its best network
        f.move("model", "best_model")
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "third", "--network", "slim.h5"])
    assert result.exit_code == 2
    assert result.stderr.endswith("error: slim.h5 holds only its best network (best_model): add --best to start from it\n")
    assert CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "third", "--network", "slim.h5",
                                      "--best"]).exit_code == 0


def test_a_numbered_history_the_run_does_not_reach_may_be_a_folder(tmp_path, monkeypatch):
    (tmp_path / "run_3.h5").mkdir()  # steps 10 // save_versions 5: run_1.h5 and run_2.h5 only
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--save-freq", "5", "--name", "run",
                                        "--save-versions", "5"])
    assert result.exit_code == 0, result.stderr
    assert files_under(tmp_path) == ["run.ckpt", "run_1.h5", "run_2.h5", "run_3.h5"]


def test_a_lock_file_that_cannot_be_created_is_one_line(tmp_path, monkeypatch):
    from dqn_nature.commands import train as command

    monkeypatch.setattr(command, "check_resources", lambda config: None)  # as if the folder came after the checks
    (tmp_path / ".run.lock").mkdir()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "run"])
    assert result.exit_code == 2 and result.stderr.endswith(
        f"error: cannot create the lock file .run.lock of --name run: {os.strerror(errno.EISDIR)}\n"), result.stderr


def test_a_run_that_ends_as_a_second_one_starts_keeps_its_files(tmp_path, monkeypatch):
    # A run under the same --name ends (its files written, its lock released) after the second
    # one has read its options and before it takes the lock: the second, started about a second
    # after the first, replaced them. It looks for them once it holds the lock.
    from dqn_nature.commands import train as command

    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "first"]).exit_code == 0
    finished = {p.name.replace("first", "run"): p.read_bytes() for p in tmp_path.iterdir()}
    take_lock = command.run_lock

    def the_first_run_ends_first(name):
        for file, data in finished.items():
            (tmp_path / file).write_bytes(data)
        return take_lock(name)

    monkeypatch.setattr(command, "run_lock", the_first_run_ends_first)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "20", "--name", "run"])
    assert result.exit_code == 2 and result.stderr.endswith(
        "error: run.h5 exists, from an earlier run: continue it with --resume run, replace it with --overwrite, "
        "or choose another --name\n"), result.stderr
    assert {file: (tmp_path / file).read_bytes() for file in finished} == finished
    assert not (tmp_path / ".run.lock").exists()


def test_help_shows_one_default_per_option():
    ctx = click.Context(train, info_name="dqn-train")
    records = {p.name: p.get_help_record(ctx)[1] for p in train.params if isinstance(p, click.Option)}
    assert records["name"].endswith("may include a folder [DQN3_0_1_<game>_FULL_Y]")
    assert records["checkpoint_freq"].endswith("every this many steps [save_freq]")
    assert records["game"].endswith("(pong, breakout, ...)")  # required (unless resuming): no default
    assert records["steps"].endswith("[default: 50000000]")
    assert all(text.count("[") <= 1 and "[default: None]" not in text for text in records.values()), records


@pytest.mark.parametrize("resume", [False, True])
def test_a_signal_while_the_run_is_set_up_stops_it_before_training(tmp_path, monkeypatch, resume):
    # A KeyboardInterrupt raised inside h5py as the checkpoint (or --network) is read was swallowed
    # there ("Exception ignored in ..."): the run went on to the end, exit 0. The signal came in
    # while h5py read; here the reading function gets it, and swallows the KeyboardInterrupt as h5py did.
    import signal
    import time

    from dqn_nature import train as training

    command = importlib.import_module("dqn_nature.commands.train")
    monkeypatch.chdir(tmp_path)
    run = [*SHORT, "--steps", "10", "--name", "run"]
    if resume:
        assert CliRunner().invoke(train, run).exit_code == 0
        run = ["--resume", "run", "--steps", "20"]
    saved = {p: p.read_bytes() for p in tmp_path.iterdir()}
    patched, reading = (command, "restore_checkpoint") if resume else (training.Trainer, "__init__")
    read = getattr(patched, reading)

    def interrupted(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        return read(*args, **kwargs)

    monkeypatch.setattr(patched, reading, interrupted)
    try:
        result = CliRunner().invoke(train, run)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert result.exit_code == 130, result.output
    assert "SIGINT: stopping once the run is set up, before it writes anything" in result.stderr
    assert result.stderr.endswith("Stopped by SIGINT before training: nothing written"
                                  + ("; run.ckpt is as it was\n" if resume else "\n")), result.stderr
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == saved


def test_a_fresh_run_replaces_an_earlier_runs_evaluations_only_with_overwrite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    logs = ["--steps", "200", "--eval-freq", "100", "--eval-steps", "20", "--csv-log", "log.csv", "--tensorboard", "tb"]
    assert CliRunner().invoke(train, [*SHORT, *logs, "--name", "first"]).exit_code == 0
    logged = (tmp_path / "log.csv").read_bytes()
    result = CliRunner().invoke(train, [*SHORT, *logs, "--name", "second"])
    assert result.exit_code == 2 and result.stderr.endswith("error: --csv-log 'log.csv' holds an earlier run's "
                                                            "evaluations: replace them with --overwrite, or log "
                                                            "elsewhere\n")
    result = CliRunner().invoke(train, [*SHORT, *logs[:-4], "--tensorboard", "tb", "--name", "second"])
    assert result.exit_code == 2 and "error: --tensorboard 'tb' holds an earlier run's evaluations" in result.stderr
    assert (tmp_path / "log.csv").read_bytes() == logged and not (tmp_path / "second.h5").exists()
    result = CliRunner().invoke(train, [*SHORT, *logs, "--name", "second", "--overwrite", "--seed", "2"])
    assert result.exit_code == 0, result.output
    with open(tmp_path / "log.csv", newline="") as fh:
        (row,) = csv.DictReader(fh)  # the second run's evaluation alone
    assert float(row["v_history"]) == load_history(str(tmp_path / "second.h5")).v_history[0]
    events = tensorboard_events(str(tmp_path / "tb"))
    events.Reload()  # the earlier run's scalars hidden
    assert [(e.step, e.value) for e in events.Scalars("v_history")] == [(200, pytest.approx(float(row["v_history"])))]


@pytest.mark.parametrize("content, problem", [(b"\x89HDF\r\n\x1a\n\xff\xfe", "it is not a text file"),
                                              (",".join(eval_log.CSV_COLUMNS).encode() + b"\r\n" + b"x" * 9000
                                               + b"\xff\xfe", "it is not a text file"),  # past the header
                                              (b"a,b\n1,2\n", "its columns are not a dqn-train evaluation log's")])
def test_a_csv_log_of_something_else_is_kept(tmp_path, monkeypatch, content, problem):
    (tmp_path / "log.csv").write_bytes(content)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, [*SHORT, "--steps", "10", "--name", "run", "--csv-log", "log.csv"])
    assert result.exit_code == 2 and result.stderr.endswith(f"--csv-log 'log.csv' exists and {problem}; "
                                                            "give another file\n")
    assert files_under(tmp_path) == ["log.csv"] and (tmp_path / "log.csv").read_bytes() == content


def test_a_resume_drops_the_csv_rows_after_its_checkpoint_and_no_others(tmp_path):
    path = str(tmp_path / "log.csv")
    header = ",".join(eval_log.CSV_COLUMNS)
    assert eval_log.earlier_records(path, None) is None  # no file yet
    with open(path, "w") as fh:
        fh.write(header + "\n")
    assert eval_log.earlier_records(path, None) is None  # a header alone holds no evaluation
    rows = [f"{step}," + ",".join(["1"] * (len(eval_log.CSV_COLUMNS) - 1)) for step in (100, 200, 300)]
    with open(path, "w") as fh:
        fh.write("\n".join([header, *rows]) + "\n")
    assert eval_log.earlier_records(path, None) == f"--csv-log {path!r}"
    eval_log.EvaluationLogs(path, None, {}, start_step=200).close()  # resumed at its step-200 checkpoint
    with open(path, newline="") as fh:
        assert [line.rstrip() for line in fh] == [header, *rows[:2]]
    eval_log.EvaluationLogs(path, None, {}, start_step=0).close()  # a fresh run with --overwrite
    with open(path, newline="") as fh:
        assert [line.rstrip() for line in fh] == [header]


def test_evaluation_logs_of_a_resumed_run_through_a_stream_and_tensorboard(tmp_path, capfd):
    def run(start_step, *steps):  # each a process of its own: rows to its stdout, scalars to tb/
        logs = eval_log.EvaluationLogs("/dev/stdout", str(tmp_path / "tb"), {"seed": 1}, start_step=start_step)
        for step in steps:
            trainer = types.SimpleNamespace(history={k: [step] for k in eval_log.LUA_HISTORIES},
                                            agent=types.SimpleNamespace(train_epsilon=lambda: 0.5))
            logs.write(trainer, types.SimpleNamespace(step=step, frames=4 * step, lr=0.1, train_fps=2, eval_fps=3))
        logs.close()
        return capfd.readouterr().out.splitlines()

    header = ",".join(eval_log.CSV_COLUMNS)
    first = run(0, 100, 200, 300)
    assert first[0] == header and [line.split(",")[0] for line in first] == ["step", "100", "200", "300"]
    resumed = run(200, 300, 400)  # a header for each process's rows: a stream cannot be read back
    assert resumed[0] == header and [line.split(",")[0] for line in resumed] == ["step", "300", "400"]
    events = tensorboard_events(str(tmp_path / "tb"))
    events.Reload()  # the killed run's 300 hidden; its 100 and 200, up to the checkpoint, kept
    assert [(e.step, e.value) for e in events.Scalars("reward_history")] == [(s, s) for s in (100, 200, 300, 400)]


def test_bad_input_console_script(tmp_path):
    result = dqn_train(tmp_path, *SHORT, "--game", "space_invader")
    assert result.returncode == 2
    assert result.stderr.startswith("dqn-train: error: ") and "space_invaders" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and files_under(tmp_path) == []


@pytest.mark.parametrize("args", [["--game", "nosuchgame"], ["--game", "pong", "--steps", "0"],
                                  ["--game", "pong", "--agent-params", "lr=,"]])
def test_bad_input_is_refused_before_torch_loads(tmp_path, args):
    # Importing torch takes seconds: a mistyped option must not wait for it.
    code = ("import atexit, sys; atexit.register(lambda: print('torch' in sys.modules)); "
            "from dqn_nature.commands.train import main; main(sys.argv[1:])")
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (2, "False\n"), result.stderr
    assert files_under(tmp_path) == []


USAGE_ERRORS = [
    ("dqn_nature.commands.train", ["-eval_frq", "5"], r"No such option '-eval_frq'.*'-eval_freq'"),  # a Lua flag, mistyped
    ("dqn_nature.commands.train", ["--name", "-run", "--bogus"], r"No such option '--bogus'"),  # "-run" is --name's value
    ("dqn_nature.commands.test", ["--game", "pong"], r"Missing option '--network'"),
    ("dqn_nature.commands.test", ["-gif", "x.gif"], r"No such option '-gif'.*'-gif_file'"),
    ("dqn_nature.commands.test", ["-ep", "1"], r"No such option '-ep'"),  # two letters, not -e and -p
    ("dqn_nature.commands.test", ["--game", "pong", "--network", "x.h5", "--seed", "99999999999"],
     r"Invalid value for '--seed'.*0<=x<=2147483647"),  # the emulator's seed is a C int
    ("dqn_nature.commands.test", ["--game", "pong", "--network", "x.h5", "--gpu", "-3"], r"Invalid value for '--gpu'"),
    ("dqn_nature.commands.convert", ["a.t7"], r"Missing argument 'NEW.h5'"),
    ("dqn_nature.commands.sweep", ["--out", "s"], r"Missing option '--games'"),
    ("dqn_nature.commands.slim", ["a.h5", "b.h5", "--networks", "all"], r"Invalid value for '--networks': 'all'"),
    ("dqn_nature.commands.plot", ["--bogus"], r"No such option '--bogus'"),
]


def test_os_reason_is_the_system_s_words_for_the_errno():
    assert os_reason(OSError(errno.ENOSPC, "Unable to synchronously write\n(file write failed: tmp.h5)")) == \
        os.strerror(errno.ENOSPC)
    assert os_reason(OSError("a message\n  without errno")) == "a message without errno"


def test_a_second_signal_exits_at_once():
    code = ("import os, signal, time; from dqn_nature.console import StopRequest; s = StopRequest(); "
            "os.kill(os.getpid(), signal.SIGTERM); time.sleep(0.2); print(s.name, flush=True); "
            "os.kill(os.getpid(), signal.SIGINT); time.sleep(5); print('went on')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert (result.returncode, result.stdout) == (128 + signal.SIGINT, "SIGTERM\n"), result.stderr


def test_a_message_of_several_lines_is_printed_as_one(capsys):
    with pytest.raises(SystemExit) as stop:
        fail("cannot open x.h5:\n  unable to open file\n")
    assert stop.value.code == 2 and capsys.readouterr().err.endswith("error: cannot open x.h5: unable to open file\n")


@pytest.mark.parametrize("module, args, message", USAGE_ERRORS, ids=[" ".join(a) for _, a, _ in USAGE_ERRORS])
def test_usage_errors_are_one_line(module, args, message, capsys):
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(module).main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.splitlines()) == 1 and re.search(r"error: " + message, err), err


@pytest.mark.parametrize("steps, learn_start, eval_freq, warned, evaluations", [
    (120, 100, 120, [], [120]),
    (120, 100, 150, ["before the next evaluation at step 150"], []),
    (100, 100, 50, ["before learning starts at step 105", "before the next evaluation at step 150"], []),
    (104, 100, 50, ["before learning starts at step 105", "before the next evaluation at step 150"], []),
    (105, 100, 105, [], [105]),
])
def test_a_run_too_short_to_learn_or_evaluate_is_warned(tmp_path, steps, learn_start, eval_freq, warned,
                                                        evaluations):
    result = dqn_train(tmp_path, *SHORT, "--learn-start", learn_start, "--steps", steps, "--eval-freq", eval_freq,
                       "--eval-steps", 20)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == len(warned), result.stderr
    assert all(line.startswith("warning: the run ends at step") and w in line for w, line in zip(warned, lines))
    assert load_history(str(tmp_path / "DQN3_0_1_pong_FULL_Y.h5")).step_history.tolist() == evaluations


@pytest.mark.parametrize("cpu, expected", [
    ({"architecture": "x86_64", "amx_tile": True, "avx512_bf16": True}, None),
    ({"architecture": "x86_64", "amx_tile": False, "avx512_bf16": True}, None),  # faster on a Zen 4, slower elsewhere
    ({"architecture": "x86_64", "amx_tile": False, "avx512_bf16": False}, "emulated, about 5 times slower"),
    ({"architecture": "aarch64"}, None),
])
def test_bf16_on_a_cpu_without_native_bfloat16_is_warned(monkeypatch, cpu, expected):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: cpu)
    warning = precision_warning("bf16", -1)
    assert warning is None if expected is None else warning.startswith("warning: this CPU has") and expected in warning
    assert precision_warning("bf16", 0) is None and precision_warning("fp32", -1) is None


def test_dqn_train_prints_the_precision_warning(tmp_path):
    result = dqn_train(tmp_path, *SHORT, "--steps", 100, "--eval-freq", 100, "--eval-steps", 20, "--precision", "bf16")
    assert result.returncode == 0, result.stderr
    expected = [w for w in [precision_warning("bf16", -1)] if w]  # this machine's CPU decides
    lines = result.stderr.splitlines()
    assert lines[:len(expected)] == expected and len(lines) == len(expected) + 2, lines
    assert all(line.startswith("warning: the run ends at step 100") for line in lines[len(expected):])


# Loaded from PYTHONPATH by Python's startup: a Ctrl-C (SIGINT) lands while the command imports click.
CTRL_C_DURING_IMPORTS = """
import builtins, os, signal
_import = builtins.__import__
def _hook(name, *args, **kwargs):
    if name == "click" and not getattr(_hook, "done", False):
        _hook.done = True
        os.kill(os.getpid(), signal.SIGINT)
    return _import(name, *args, **kwargs)
builtins.__import__ = _hook
"""


@pytest.mark.parametrize("command", sorted(e.name for e in importlib.metadata.entry_points(group="console_scripts")
                                           if e.value.startswith("dqn_nature.")))
def test_ctrl_c_while_a_command_loads_exits_quietly(tmp_path, command):
    (tmp_path / "sitecustomize.py").write_text(CTRL_C_DURING_IMPORTS)
    result = subprocess.run([shutil.which(command), "--help"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert (result.returncode, result.stdout, result.stderr) == (130, "", "")


def test_commands_start_without_torch():
    """--help and usage errors come in a fraction of a second: no command imports torch
    (seconds) before it runs."""
    commands = ("commands.train", "commands.test", "commands.convert", "commands.plot", "commands.report", "commands.sweep", "commands.slim")
    script = f"import sys\nfor m in {commands}: __import__('dqn_nature.' + m)\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout == "False\n"
