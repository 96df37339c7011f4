"""dqn-sweep: option checks in-process; real sweeps on a local Ray instance started by the
command itself (marked ``ray``; about 60 s on 2 cores)."""
import csv
import json
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import click
import pytest
from click.testing import CliRunner

from dqn_nature import load_history, sweep
from dqn_nature.commands.sweep import sweep_command
from dqn_nature.config import Config
from dqn_nature.history import HISTORY_FIELDS, save_history

# One evaluation, at step 300 (learning starts at 100 with a small prefetch buffer; 10 updates).
TINY = ["--steps", "300", "--eval-freq", "300", "--eval-steps", "50", "--replay-memory", "1000",
        "--buffer-size", "64", "--valid-size", "50", "--learn-start", "100", "--update-freq", "20", "--gpu", "-1",
        "--threads", "1"]


def test_parse_seeds():
    assert sweep.parse_seeds("1-5") == [1, 2, 3, 4, 5]
    assert sweep.parse_seeds("1,3,7") == [1, 3, 7]
    assert sweep.parse_seeds("2-3, 10,2") == [2, 3, 10]
    assert sweep.parse_seeds("1-600,1-600,1000") == [*range(1, 601), 1000]  # a seed given twice counts once
    assert sweep.parse_seeds("1-1000") == list(range(1, 1001))
    assert sweep.parse_seeds("007-0008") == [7, 8]
    for bad in ("5-1", "a", "1,,2", "-3", "1-100000000", "2147483648", "1-1001", "1-600,401-1001", "9" * 5000):
        with pytest.raises(click.BadParameter):
            sweep.parse_seeds(bad)


@pytest.mark.parametrize("args, message", [
    (["--seeds", "1", "--seed", "3"], "--seed is set by the sweep"),
    (["--steps", "many"], "'many' is not a valid integer"),
    (["--learn-start", "10"], "learn_start (10) must be at least bufferSize"),
    (["--args", "no_such_preset"], "no preset 'no_such_preset'"),
    (["stray"], "unexpected extra argument"),
    (["--resume", "x.ckpt"], "--resume is the sweep's to give"),
    (["--cpus-per-run", "inf"], "Invalid value for '--cpus-per-run': 'inf' is not a finite number"),
    (["--cpus-per-run", "nan"], "Invalid value for '--cpus-per-run': 'nan' is not a finite number"),
    (["--cpus-per-run", "1e400"], "Invalid value for '--cpus-per-run': '1e400' is not a finite number"),
    (["--gpus-per-run", "nan"], "Invalid value for '--gpus-per-run': 'nan' is not a finite number"),
    # A name out of the run's folder gave every seed one file; the second run of the sweep took
    # them all as finished.
    (["--seeds", "1-2", "--name", "../shared"], "Invalid value for --name: '../shared': give a file base name"),
    (["--name", "/tmp/shared"], "Invalid value for --name: '/tmp/shared': give a file base name"),
    (["--name", "sub/run"], "Invalid value for --name: 'sub/run': give a file base name"),
    (["--name", ".."], "Invalid value for --name: '..': give a file base name"),
    (["--name", "run.h5"], "Invalid value for --name: 'run.h5': give a file base name"),  # failed after Ray started
])
def test_bad_options_exit_2_before_anything_runs(tmp_path, monkeypatch, args, message):
    monkeypatch.setattr(sweep, "start_ray", lambda address: pytest.fail("Ray started"))
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--out", str(tmp_path / "s"), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "s").exists()


def test_an_out_folder_that_cannot_be_written_stops_before_ray_starts(monkeypatch):
    monkeypatch.setattr(sweep, "start_ray", lambda address: pytest.fail("Ray started"))
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--out", "/proc/sweep", *TINY])
    assert result.exit_code == 2 and "error: cannot write in --out /proc/sweep: " in result.output


@pytest.mark.parametrize("args, message", [
    (["--games", "pong,pongg"], "error: unknown game 'pongg'; did you mean pong?"),
    (["--games", "pong,pongg", "--address", "auto"], "error: unknown game 'pongg'; did you mean pong?"),
])
def test_games_are_checked_before_ray_starts(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sweep, "start_ray", lambda address: pytest.fail("Ray started"))
    result = CliRunner().invoke(sweep_command, [*args, "--out", "s", *TINY])
    assert result.exit_code == 2 and message in result.output
    assert os.listdir(tmp_path) == []


def test_a_cluster_may_hold_roms_that_this_machine_lacks(tmp_path, monkeypatch):
    def start_ray(address):
        raise ConnectionError("reached")

    monkeypatch.setattr(sweep, "start_ray", start_ray)
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--game-path", str(tmp_path / "roms"),
                                                      "--address", "auto", "--out", str(tmp_path / "s"), *TINY])
    assert result.output.endswith("error: cannot start or reach Ray at auto: reached\n")


class Cluster:
    """Ray's cluster, where the runs are played by a stand-in for ``sweep.run_all``."""

    def cluster_resources(self):
        return {"CPU": 2}

    def shutdown(self):
        pass


def without_ray(monkeypatch, run_all):
    """dqn-sweep with ``run_all`` in place of ``sweep.run_all`` and no Ray; pytest's signal handlers stay."""
    monkeypatch.setattr(sweep, "start_ray", lambda address: Cluster())
    monkeypatch.setattr(sweep, "run_all", run_all)
    monkeypatch.setattr(sweep.signal, "signal", lambda *args: None)


def test_a_record_that_cannot_be_written_does_not_stop_the_runs(tmp_path, monkeypatch):
    """sweep.json written at the start, then on a full disk: each later write warns, the runs
    go on, and the sweep ends with its summary and exit status 1 (not a traceback)."""
    def run_all(ray, todo, table, forwarded, max_concurrent, cpus, gpus, save):
        for run in todo:
            run.state = "finished"
            assert not save()  # as run_all saves after each change of state
        return False

    def write_record(*args):
        if os.path.exists(tmp_path / "sweep.json"):
            raise OSError(28, "No space left on device")
        real_write_record(*args)

    real_write_record = sweep.write_record
    monkeypatch.setattr(sweep, "write_record", write_record)
    without_ray(monkeypatch, run_all)
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--seeds", "1-2", "--out", str(tmp_path),
                                                      *TINY])
    assert result.exit_code == 1, result.output
    warning = (f"dqn-sweep: warning: cannot write {tmp_path / 'sweep.json'}: No space left on device (the runs are "
               "unaffected; the same command run again rewrites it)")
    assert result.stderr.splitlines() == [warning] * 3  # after each of the two runs, and at the end
    assert "Sweep: 2 finished (00:00) of 2 runs" in result.stdout
    assert json.loads((tmp_path / "sweep.json").read_text())["finished"] is None  # the first write stays


def test_lua_spelled_options_pass_through():
    forwarded, config = sweep.train_arguments(["-eval_freq", "700", "-hist_len", "2", "--steps=900"], "pong",
                                             None, 2, 0)
    assert forwarded == ["-eval_freq", "700", "-hist_len", "2", "--steps=900", "--threads", "2", "--gpu", "-1"]
    assert (config.eval_freq, config.hist_len, config.steps) == (700, 2, 900)


def test_without_ray_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    # -hist_len is dqn-train's, not a -h for help
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--out", str(tmp_path), *TINY,
                                                      "-hist_len", "4"])
    assert result.exit_code == 2
    assert "pip install 'dqn-nature[ray]'" in result.output


@pytest.mark.parametrize("args", [["-h"], ["--games", "pong", "-h"]])
def test_dash_h_is_the_sweeps_help(args):
    result = CliRunner().invoke(sweep_command, args)
    assert result.exit_code == 0 and "Train every GAME x SEED with dqn-train" in result.output


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_that_refuses_connections_fails_at_once(tmp_path, scheme):
    with socket.socket() as s:  # a port nobody listens on once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--out", str(tmp_path / "s"),
                                                      "--address", f"{scheme}127.0.0.1:{port}", *TINY])
    assert result.exit_code == 2
    assert result.output.endswith(f"error: cannot start or reach Ray at {scheme}127.0.0.1:{port}: Connection refused\n")


def dqn_sweep(*args):
    return subprocess.run(["dqn-sweep", *args, *TINY], capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def pong_and_failing_breakout(tmp_path_factory):
    """One sweep: two seeds of Pong, and two of Breakout, whose runs find a damaged checkpoint
    to resume."""
    pytest.importorskip("ray")
    out = tmp_path_factory.mktemp("sweep")
    for seed in (1, 2):
        (out / "breakout" / f"seed{seed}").mkdir(parents=True)
        (out / "breakout" / f"seed{seed}" / "DQN3_0_1_breakout_FULL_Y.ckpt").write_text("damaged")
    result = dqn_sweep("--games", "breakout,pong", "--seeds", "1-2", "--cpus-per-run", "0.5", "--out", str(out),
                       "--csv-log", str(out / "logs/eval.csv"), "--tensorboard", str(out / "tb"))
    with open(out / "sweep.json") as fh:
        record = json.load(fh)
    return out, result, {(r["game"], r["seed"]): r for r in record["runs"]}


@pytest.mark.ray
def test_sweep_writes_histories_and_record(pong_and_failing_breakout):
    out, result, runs = pong_and_failing_breakout
    for seed in (1, 2):
        run = runs["pong", seed]
        assert (run["state"], run["exit_code"], run["error"]) == ("finished", 0, None)
        assert run["history"] == str(out / "pong" / f"seed{seed}" / "DQN3_0_1_pong_FULL_Y.h5")
        history = load_history(run["history"])
        assert (history.game, history.steps, history.arguments["seed"]) == ("pong", 300, seed)
        assert run["seconds"] > 0 and run["started"] <= run["finished"]
        assert "--seed" in (out / "pong" / f"seed{seed}" / "train.log").read_text()
    assert f"dqn-report {out}" in result.stdout and f"dqn-plot {out}/breakout -o" in result.stdout


@pytest.mark.ray
def test_each_run_logs_apart(pong_and_failing_breakout):
    out, _, runs = pong_and_failing_breakout
    for seed in (1, 2):
        run = runs["pong", seed]
        assert run["csv_log"] == str(out / "logs/pong" / f"seed{seed}" / "eval.csv")
        assert run["tensorboard"] == str(out / "tb/pong" / f"seed{seed}")
        with open(run["csv_log"], newline="") as fh:
            (row,) = csv.DictReader(fh)
        assert (int(row["step"]), float(row["v_history"])) == (300, load_history(run["history"]).v_history[-1])
        assert len(os.listdir(run["tensorboard"])) == 1  # one event file
    assert sorted(os.listdir(out / "logs")) == ["pong"]  # breakout failed before writing


@pytest.mark.ray
def test_a_failing_run_fails_alone(pong_and_failing_breakout):
    out, result, runs = pong_and_failing_breakout
    assert result.returncode == 1, result.stderr
    for seed in (1, 2):
        run = runs["breakout", seed]
        assert run["state"] == "failed" and run["exit_code"] == 2 and run["resumed"]
        checkpoint = out / "breakout" / f"seed{seed}" / "DQN3_0_1_breakout_FULL_Y.ckpt"
        assert run["error"].startswith(f"dqn-train: error: {checkpoint}: not a readable HDF5 file")
        assert f"breakout/seed{seed} failed: {run['error']} (log: " in result.stdout


@pytest.mark.ray
def test_rerun_skips_finished_runs(pong_and_failing_breakout):
    out, _, _ = pong_and_failing_breakout
    logs = [out / "pong" / f"seed{seed}" / "train.log" for seed in (1, 2)]
    before = [os.path.getmtime(p) for p in logs]
    result = dqn_sweep("--games", "pong", "--seeds", "1-2", "--cpus-per-run", "0.5", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    with open(out / "sweep.json") as fh:
        assert [r["state"] for r in json.load(fh)["runs"]] == ["skipped", "skipped"]
    assert [os.path.getmtime(p) for p in logs] == before
    assert "2 skipped" in result.stdout


@pytest.mark.ray
@pytest.mark.parametrize("versions", [[], ["--save-versions", "100"]])
def test_a_run_past_the_steps_asked_for_is_skipped(pong_and_failing_breakout, tmp_path, versions):
    out, _, _ = pong_and_failing_breakout
    run = shutil.copytree(out / "pong" / "seed1", tmp_path / "pong" / "seed1")  # at step 300
    if versions:  # --save-versions 100 names the history of step 300 <name>_3.h5; the checkpoint keeps <name>.ckpt
        (run / "DQN3_0_1_pong_FULL_Y.h5").rename(run / "DQN3_0_1_pong_FULL_Y_3.h5")
    result = subprocess.run(["dqn-sweep", "--games", "pong", "--out", str(tmp_path), *TINY, "--steps", "200",
                             *versions], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "sweep.json").read_text())["runs"][0]["state"] == "skipped"


@pytest.mark.ray
def test_a_run_counts_as_finished_under_its_own_name_only(pong_and_failing_breakout, tmp_path):
    out, _, _ = pong_and_failing_breakout
    shutil.copytree(out / "pong" / "seed1", tmp_path / "pong" / "seed1")
    assert dqn_sweep("--games", "pong", "--out", str(tmp_path)).returncode == 0  # recorded as skipped
    result = dqn_sweep("--games", "pong", "--out", str(tmp_path), "--name", "other")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "sweep.json").read_text())["runs"][0]["state"] == "finished"
    assert load_history(str(tmp_path / "pong" / "seed1" / "other.h5")).steps == 300


def test_a_sweep_folder_holds_one_experiment(tmp_path):
    _, config = sweep.train_arguments(TINY, "pong", None, 1, 0)
    sweep.write_record(str(tmp_path / "sweep.json"), dict(options=sweep.fixed_options(config)), [], "", None)
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--out", str(tmp_path), *TINY,
                                                      "--lr", "0.001"])
    assert result.exit_code == 2
    assert f"{tmp_path / 'sweep.json'} is a sweep with lr=0.00025, not 0.001" in result.output
    assert os.listdir(tmp_path) == ["sweep.json"]


@pytest.mark.ray
def test_resources_the_cluster_lacks_are_refused(tmp_path):
    pytest.importorskip("ray")
    result = dqn_sweep("--games", "pong", "--out", str(tmp_path), "--cpus-per-run", "64")
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"--cpus-per-run 64: the Ray cluster has {os.cpu_count()} CPUs" in result.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.ray
@pytest.mark.slow
def test_a_cluster_with_token_authentication_is_reached_as_the_error_says(tmp_path):
    """``ray start --head`` with a token (Ray 2.59 and later make one with any local ray.init)
    refuses a client that does not send it, after about 20 s of retries: the error says in one
    line how to reach the cluster, and with RAY_AUTH_MODE=token and the token the sweep does
    (its refusal of --cpus-per-run 2 comes from the cluster's own resources)."""
    pytest.importorskip("ray")
    token, port = "0123456789abcdef" * 4, free_port()
    home = tempfile.mkdtemp(prefix="ray-")  # short: Ray's socket paths under it must stay within 107 bytes
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"HOME": home}
    head = subprocess.Popen(["ray", "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
                             "--include-dashboard=false", f"--ray-client-server-port={free_port()}",
                             f"--dashboard-agent-listen-port={free_port()}", f"--temp-dir={home}/ray"],
                            env=env | {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in head.stdout:
            if "Ray runtime started" in line:
                break
        assert head.poll() is None, "ray start failed"
        address = f"127.0.0.1:{port}"

        def sweep_with(**auth):
            return subprocess.run(["dqn-sweep", "--games", "pong", "--out", str(tmp_path / "s"), "--address", address,
                                   "--cpus-per-run", "2", *TINY], env=env | auth, capture_output=True, text=True,
                                  timeout=240)

        refused = sweep_with()
        assert refused.returncode == 2
        assert re.fullmatch(
            rf"dqn-sweep: error: cannot start or reach Ray at {address}: .+; on a node of the cluster use --address "
            r"auto; elsewhere set RAY_AUTH_MODE=token and put its token, which `ray get-auth-token` prints on its "
            r"head node, in RAY_AUTH_TOKEN or ~/.ray/auth_token", refused.stderr.splitlines()[-1])
        no_token = sweep_with(RAY_AUTH_MODE="token")
        assert no_token.returncode == 2
        assert no_token.stderr.splitlines()[-1].endswith(
            "; a cluster with token authentication needs its token, which `ray get-auth-token` prints on its head "
            "node, in RAY_AUTH_TOKEN or ~/.ray/auth_token")
        reached = sweep_with(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        assert reached.returncode == 2
        assert reached.stderr.splitlines()[-1] == "dqn-sweep: error: --cpus-per-run 2: the Ray cluster has 1 CPUs"
    finally:
        head.terminate()  # --block: ray start stops the cluster's processes
        head.communicate(timeout=120)
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.ray
def test_sigterm_in_the_background_stops_the_runs_and_keeps_their_files(tmp_path):
    """Started with ``&`` from a script, the sweep and the Ray workers it starts inherit SIGINT
    ignored, which is how ray.cancel reaches a task: the runs must stop all the same."""
    pytest.importorskip("ray")
    out = tmp_path / "s"
    log = out / "pong" / "seed1" / "train.log"
    sweep_process = subprocess.Popen(["dqn-sweep", "--games", "pong", "--out", str(out), *TINY, "--steps", "1000000"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 120
    while not (log.exists() and "Device:" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # into the training loop
    sweep_process.send_signal(signal.SIGTERM)
    output = sweep_process.communicate(timeout=120)[0]
    assert sweep_process.returncode == 128 + signal.SIGTERM, output
    run = json.loads((out / "sweep.json").read_text())["runs"][0]
    assert (run["state"], run["error"]) == ("failed", "interrupted")
    assert "Stopped by SIGTERM at step" in log.read_text()
    assert sorted(os.listdir(log.parent)) == ["DQN3_0_1_pong_FULL_Y.ckpt", "DQN3_0_1_pong_FULL_Y.h5", "train.log"]
    assert load_history(str(log.parent / "DQN3_0_1_pong_FULL_Y.h5")).steps > 0


def test_previous_finished_counts_only_finished_runs_of_the_same_name_and_arguments(tmp_path):
    path = str(tmp_path / "sweep.json")
    runs = [sweep.Run("pong", seed, "f", "h", "c", "l", state=state)
            for seed, state in enumerate(("finished", "skipped", "failed", "running", "pending"))]
    arguments = dict(name=None, train_args=["--steps", "300"])
    sweep.write_record(path, arguments, runs, "", None)
    assert sweep.previous_finished(path, arguments) == {("pong", 0), ("pong", 1)}
    assert sweep.previous_finished(path, {**arguments, "name": "other"}) == set()
    assert sweep.previous_finished(path, {**arguments, "train_args": ["--steps", "400"]}) == set()
    assert sweep.previous_finished(str(tmp_path / "none.json"), arguments) == set()


def test_poll_reads_the_attempt_s_log(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("Steps: 900 (frames: 3600), reward: -5.00, an earlier attempt\n")
    run = sweep.Run("pong", 1, str(tmp_path), str(tmp_path / "none.h5"), "c", str(log), log_size=log.stat().st_size)
    run.poll()
    assert (run.state, run.steps, run.reward, run.rate) == ("pending", 0, None, None)  # no news of this attempt
    with open(log, "a") as fh:
        fh.write("Steps: 300 (frames: 1200), 52.1 steps/s, ...\nSteps: 300 (frames: 1200), reward: -21.00, ...\n"
                 "Steps: 600 (frames: 2400), reward: -19.50, ...\nSteps: 700 (frames: 2800), 48.0 steps/s, ...\n")
    run.poll()
    assert (run.state, run.steps, run.reward, run.rate) == ("running", 700, -19.5, 48.0)


def test_fractions_of_a_cpu_train_on_one_thread():
    assert sweep.train_arguments([], "pong", None, 0.5, 1)[0] == ["--threads", "1"]
    assert sweep.train_arguments([], "pong", None, 3.7, 0)[0] == ["--threads", "3", "--gpu", "-1"]


def test_run_logs_go_under_game_and_seed():
    assert sweep.run_logs(Config(csv_log="logs/eval.csv", tensorboard="tb"), "pong", 3) == (
        os.path.join("logs", "pong", "seed3", "eval.csv"), os.path.join("tb", "pong", "seed3"))
    assert sweep.run_logs(Config(), "pong", 3) == (None, None)


def test_a_run_that_reached_its_steps_is_skipped_without_ray(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "start_ray", lambda address: pytest.fail("Ray started"))
    history = {k: [] for k in HISTORY_FIELDS}
    history["time_history"] = [0.0]
    (tmp_path / "pong" / "seed1").mkdir(parents=True)
    save_history(str(tmp_path / "pong" / "seed1" / "DQN3_0_1_pong_FULL_Y.h5"), game="pong", steps=300, frames=1200,
                 history=history, model={}, best_model=None, arguments=Config(game="pong").as_dict(),
                 package_version="test")
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--out", str(tmp_path), *TINY])
    assert result.exit_code == 0, result.output
    assert [r["state"] for r in json.loads((tmp_path / "sweep.json").read_text())["runs"]] == ["skipped"]


def test_one_failed_run_fails_the_sweep(tmp_path, monkeypatch):
    def run_all(ray, todo, table, forwarded, max_concurrent, cpus, gpus, save):
        todo[0].state, todo[1].state, todo[1].error = "finished", "failed", "exit status 3"
        return False

    without_ray(monkeypatch, run_all)
    result = CliRunner().invoke(sweep_command, ["--games", "pong", "--seeds", "1-2", "--out", str(tmp_path),
                                                      *TINY])
    assert result.exit_code == 1, result.output
    assert "pong/seed2 failed: exit status 3 (log: " in result.stdout


def test_train_run_starts_afresh_or_resumes_and_keeps_the_error_line(tmp_path):
    log, checkpoint = str(tmp_path / "run" / "train.log"), str(tmp_path / "run" / "run.ckpt")
    result = sweep.train_run(["--game", "pong", "--steps", "0"], checkpoint, log, str(tmp_path))
    assert (result["exit_code"], result["resumed"]) == (2, False)
    assert result["error"] == "dqn-train: error: steps must be positive, not 0"
    with open(checkpoint, "w") as fh:
        fh.write("damaged")
    result = sweep.train_run(["--game", "pong"], checkpoint, log, str(tmp_path))
    assert (result["exit_code"], result["resumed"]) == (2, True)
    assert result["error"].startswith(f"dqn-train: error: {checkpoint}: ")
    headers = [line for line in open(log) if line.startswith("# dqn-sweep on ")]
    assert "--overwrite --game pong --steps 0" in headers[0] and f"--resume {checkpoint} --game pong" in headers[1]
