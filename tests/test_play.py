"""``dqn-test`` on the real emulator: short Pong games from an ``.h5`` history and a DQN 3.0
``.t7`` snapshot, the GIF (every emulator frame, exactly), the CSV, and bad input."""
import csv
import dataclasses
import os
import re
import resource
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import t7writer
from helpers import assert_bad_input
from dqn_nature.environment import GameEnvironment
from dqn_nature.history import HISTORY_FIELDS, HistoryError, save_history
from dqn_nature.convnet import convnet_atari3
from dqn_nature.network_files import load_network, save_network_params
from dqn_nature.commands.slim import slim_command
from dqn_nature.neural_q_learner import NeuralQLearner
from dqn_nature.commands.test import test_command as dqn_test_command
from dqn_nature.play import NATURE, agent_for, draw_overlay, evaluate, play

STEPS = 300
BASE = ["--game", "pong", "--max-steps", STEPS, "--seed", 3, "--threads", 1]
EPISODE_LINE = re.compile(r"^Episode (\d+): score (-?\d+), (\d+) steps, (\d+) frames", re.M)


@pytest.fixture
def iio():
    """imageio's v3 API (in the test extra); without it the test is skipped."""
    return pytest.importorskip("imageio.v3")


@pytest.fixture(scope="module")
def weights():
    torch.manual_seed(0)
    return convnet_atari3(6).state_dict()


def write_history(path, model, arguments):
    """A Pong history, before any evaluation, of the network ``model`` and the run options ``arguments``."""
    history = {k: [] for k in HISTORY_FIELDS}
    history["time_history"] = [0.0]
    save_history(str(path), game="pong", steps=0, frames=0, history=history, model=model, best_model=None,
                 arguments=arguments, package_version="test")


@pytest.fixture(scope="module")
def networks(tmp_path_factory, weights):
    """The same network as an .h5 history and as a DQN 3.0 .t7 snapshot."""
    folder = tmp_path_factory.mktemp("nets")
    write_history(folder / "run.h5", weights, {"hist_len": 4})
    net = t7writer.dqn_network({k: v.numpy() for k, v in weights.items()})
    t7writer.save(folder / "run.t7", {"model": net, "reward_history": [], "time_history": [0],
                                      "arguments": {"env": "pong", "agent_params": {"learn_start": 50000}}})
    return folder / "run.h5", folder / "run.t7"


@pytest.fixture(scope="module")
def replay(weights, single_threaded):
    """The steps dqn-test plays with BASE's options, played here with dqn_nature.play.play."""
    env = GameEnvironment("pong", seed=3)
    agent = NeuralQLearner(env.get_actions(), seed=3, replay_memory=36, bufferSize=32)
    agent.network.load_state_dict(weights)
    return list(play(env, agent, 1, 0.05, STEPS))


def dqn_test(*args):
    result = CliRunner().invoke(dqn_test_command, [str(a) for a in args])
    assert result.exit_code == 0 or isinstance(result.exception, SystemExit), result.exception
    return result


def test_plays_from_h5_and_t7_and_writes_gif_and_csv(tmp_path, networks, replay, iio):
    outputs = {}
    for net in networks:
        gif, table = tmp_path / f"{net.suffix[1:]}.gif", tmp_path / f"{net.suffix[1:]}.csv"
        result = dqn_test(*BASE, "--network", net, "--gif-file", gif, "-csv_file", table)
        assert result.exit_code == 0, result.output
        (episode, score, steps, frames), = EPISODE_LINE.findall(result.output)
        assert (episode, int(steps), int(frames)) == ("0", STEPS, 4 * STEPS)  # a Pong game outlasts 300 steps
        assert f"Mean score {score}, std 0 over 1 episode" in result.output
        frames_back = iio.imread(gif, index=None)
        assert frames_back.shape == (4 * STEPS, 210, 160, 3)
        assert iio.immeta(gif, index=0)["duration"] == 20  # 1/50 s: GIF delays are whole centiseconds
        assert iio.immeta(gif, index=0)["loop"] == 0  # loops for ever
        with open(table, newline="") as fh:
            rows = list(csv.reader(fh))
        assert rows[0] == ["episode", "step", "action", "reward", "q_NOOP", "q_FIRE", "q_RIGHT", "q_LEFT",
                           "q_RIGHTFIRE", "q_LEFTFIRE"]
        assert len(rows) == STEPS + 1 and [r[1] for r in rows[1:]] == [str(i) for i in range(STEPS)]
        assert sum(float(r[3]) for r in rows[1:]) == int(score)
        outputs[net.suffix] = frames_back, rows[1:]

    # the .t7 network plays exactly as the .h5 one: same weights, same seed
    assert np.array_equal(outputs[".h5"][0], outputs[".t7"][0])
    assert outputs[".h5"][1] == outputs[".t7"][1]
    # every emulator frame, exactly as the emulator drew it; actions and Q-values as the agent chose
    frames, rows = outputs[".h5"]
    assert np.array_equal(frames, np.concatenate([s.frames for s in replay]))
    assert [int(r[2]) for r in rows] == [s.action for s in replay]
    q = np.array([[float(x) for x in r[4:]] for r in rows])
    greedy = np.array([s.action for s in replay]) == q.argmax(1)
    assert greedy.mean() > 0.85  # epsilon 0.05: nearly every action is the argmax of the written Q-values


def test_frame_skip_overlay_and_episodes(tmp_path, networks, replay, iio):
    gif = tmp_path / "skip.gif"
    result = dqn_test(*BASE, "--network", networks[0], "--gif-file", gif, "--frame-skip", "--overlay")
    assert result.exit_code == 0, result.output
    frames = iio.imread(gif, index=None)
    assert frames.shape == (STEPS, 210, 160, 3)
    assert iio.immeta(gif, index=0)["duration"] == 70  # actrep 4 frames at 60 fps, as test_agent.lua's 7 cs
    raw = np.stack([s.frames[-1] for s in replay])
    assert np.array_equal(frames[:, :190], raw[:, :190])  # the overlay is drawn in the bottom-left corner only
    assert not np.array_equal(frames[:, 190:, :40], raw[:, 190:, :40])
    names = ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]  # the score after the step, the action chosen
    assert np.array_equal(frames, [draw_overlay(s.frames[-1], f"{s.score:g} {names[s.action]}") for s in replay])

    result = dqn_test(*BASE[:2], "--max-steps", 40, "--network", networks[0], "--episodes", 2, "--random-starts", 5)
    assert result.exit_code == 0, result.output
    assert [m[0] for m in EPISODE_LINE.findall(result.output)] == ["0", "1"]
    assert "over 2 episode(s)" in result.output and "stopped at --max-steps 40" in result.output


def test_pool_frms(tmp_path, networks, weights, single_threaded):
    table = tmp_path / "mean.csv"
    result = dqn_test(*BASE[:2], "--max-steps", 60, "--seed", 3, "--network", networks[0], "-pool_frms",
                      'type="mean",size=3', "--csv-file", table)
    assert result.exit_code == 0, result.output
    with open(table, newline="") as fh:
        q = np.array([[float(x) for x in r[4:]] for r in list(csv.reader(fh))[1:]])
    # the Q-values of an agent that sees the mean of the last 3 frames, not the max of 2
    env = GameEnvironment("pong", seed=3, pool_size=3, pool_type="mean")
    agent = NeuralQLearner(env.get_actions(), seed=3, replay_memory=36, bufferSize=32)
    agent.network.load_state_dict(weights)
    expected = np.array([s.q for s in play(env, agent, 1, 0.05, 60, with_q=True)])
    np.testing.assert_allclose(q, expected, rtol=1e-6)
    max2 = dqn_test(*BASE[:2], "--max-steps", 60, "--seed", 3, "--network", networks[0], "--csv-file", table)
    assert max2.exit_code == 0
    with open(table, newline="") as fh:
        assert not np.allclose(q, [[float(x) for x in r[4:]] for r in list(csv.reader(fh))[1:]])


def test_plays_from_a_params_h5_vector(tmp_path, networks, weights):
    """A ``--save-network-params`` vector plays as its history's network; it keeps its hist_len."""
    net = convnet_atari3(6)
    net.load_state_dict(weights)
    save_network_params(str(tmp_path / "run.params.h5"), net)
    tables = [tmp_path / "h5.csv", tmp_path / "params.csv"]
    for network, table in zip((networks[0], tmp_path / "run.params.h5"), tables):
        assert dqn_test(*BASE[:2], "--max-steps", 60, "--network", network, "--csv-file", table).exit_code == 0
    assert tables[0].read_text() == tables[1].read_text()
    assert_bad_input(dqn_test(*BASE[:2], "--network", tmp_path / "run.params.h5", "--best"), "not a best one")

    save_network_params(str(tmp_path / "two.params.h5"), convnet_atari3(6, 2))
    state, stored = load_network(str(tmp_path / "two.params.h5"))
    assert state["conv1.weight"].shape[1] == 2 and stored == {}


def test_the_network_s_run_gives_the_defaults(tmp_path, networks, weights, single_threaded):
    """Without --game, --actrep, --random-starts and --pool-frms, dqn-test plays with the values
    that the network's run stored; a given option wins."""
    stored = tmp_path / "stored.h5"
    write_history(stored, weights, dict(game="pong", actrep=2, random_starts=5, pool_type="mean", pool_size=3,
                                        hist_len=4))
    note = "dqn-test: note: actrep 2, random_starts 5, pool_type mean, pool_size 3 from the network's run\n"
    tables = {}
    for name, args, stderr in (("stored", ["--network", stored], note),
                               ("given", ["--network", networks[0], "--game", "pong", "--actrep", 2,  # stores none
                                          "--random-starts", 5, "--pool-frms", 'type="mean",size=3'], "")):
        tables[name] = tmp_path / f"{name}.csv"
        result = dqn_test(*args, "--max-steps", 60, "--episodes", 2, "--seed", 3, "--csv-file", tables[name])
        assert result.exit_code == 0 and result.stderr == stderr, result.output
        assert [int(m[3]) for m in EPISODE_LINE.findall(result.output)] == [120, 120]  # 60 steps of 2 frames
    assert tables["stored"].read_text() == tables["given"].read_text()

    result = dqn_test("--network", stored, "--actrep", 4, "--max-steps", 60, "--seed", 3)
    assert [int(m[3]) for m in EPISODE_LINE.findall(result.output)] == [240]
    assert result.stderr == "dqn-test: note: random_starts 5, pool_type mean, pool_size 3 from the network's run\n"
    result = dqn_test("-env", "space_invaders", "-network", networks[1], "--max-steps", 10)  # its 6 actions fit
    assert result.exit_code == 0 and result.stderr == "dqn-test: note: the network was trained on pong\n"


def test_video(tmp_path, networks, iio):
    pytest.importorskip("imageio_ffmpeg")
    video = tmp_path / "play.mp4"
    result = dqn_test(*BASE[:2], "--max-steps", 30, "--network", networks[0], "--video", video)
    assert result.exit_code == 0, result.output
    assert iio.imread(video, index=None, plugin="FFMPEG").shape[0] == 120


def test_video_on_a_full_disk_keeps_the_previous_one(tmp_path, networks):
    # ffmpeg fails after the frames, on the video's last bytes (the index an .mp4 ends with):
    # imageio_ffmpeg.write_frames did not see it, and the truncated file replaced the good one.
    pytest.importorskip("imageio_ffmpeg")
    video = tmp_path / "play.mp4"
    command = [shutil.which("dqn-test"), "--network", str(networks[0]), *map(str, BASE[:2]), "--max-steps", "30",
               "--video", str(video)]
    subprocess.run(command, capture_output=True, check=True)
    good = video.read_bytes()
    full = subprocess.run(command, capture_output=True, text=True,  # the limit stands for a full disk
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (len(good) - 1,) * 2))
    assert full.returncode == 1 and re.fullmatch(r"dqn-test: error: cannot write the output files: ffmpeg .*\n",
                                                 full.stderr), full.stderr
    assert "Wrote" not in full.stdout
    assert video.read_bytes() == good and os.listdir(tmp_path) == ["play.mp4"]


def test_sigint_keeps_what_was_played(tmp_path, networks, iio):
    h5, _ = networks
    proc = subprocess.Popen([shutil.which("dqn-test"), "--network", str(h5), *map(str, BASE), "--max-steps", "50",
                             "--episodes", "1000", "--csv-file", str(tmp_path / "steps.csv"),
                             "--gif-file", str(tmp_path / "play.gif")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("Episode 1:"):
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    episodes = int(re.fullmatch(r"Stopped by SIGINT after (\d+) episode\(s\); the files hold every step played\n",
                                err)[1])
    assert episodes >= 2 and f"over {episodes} episode(s)" in out
    with open(tmp_path / "steps.csv", newline="") as fh:
        steps = len(list(csv.DictReader(fh)))
    assert steps >= 50 * episodes
    assert iio.improps(tmp_path / "play.gif").shape[0] == 4 * steps  # every frame of every step played


def test_a_history_holding_one_network_plays_it(tmp_path, weights):
    """A dqn-slim copy holding only best_model plays it without --best, one holding only model
    plays it with --best, each saying so in one line; a copy without networks is refused."""
    torch.manual_seed(1)
    best = convnet_atari3(6).state_dict()
    run = tmp_path / "run.h5"
    history = {k: [0] for k in HISTORY_FIELDS}
    history["time_history"] = [0.0, 1.0]
    save_history(str(run), game="pong", steps=1, frames=4, history=history, model=weights, best_model=best,
                 arguments={"hist_len": 4}, package_version="test")
    for kept in ("best", "last", "none"):
        result = CliRunner().invoke(slim_command, [str(run), str(tmp_path / f"{kept}.h5"), "--networks", kept])
        assert result.exit_code == 0, result.output
    played = {}
    for args in (["--network", run], ["--network", run, "--best"], ["--network", tmp_path / "best.h5"],
                 ["--network", tmp_path / "best.h5", "--best"], ["--network", tmp_path / "last.h5", "--best"]):
        table = tmp_path / "steps.csv"
        result = dqn_test(*BASE[:2], "--max-steps", 30, *args, "--csv-file", table)
        assert result.exit_code == 0, result.output
        with open(table, newline="") as fh:
            played[tuple(map(str, args))] = [[float(x) for x in r[2:]] for r in list(csv.reader(fh))[1:]]
        note = result.stderr.strip()
        if args == ["--network", tmp_path / "best.h5"]:
            assert note == f"dqn-test: note: {tmp_path / 'best.h5'} holds only its best network (best_model): playing it"
        elif args[1] == tmp_path / "last.h5":
            assert note == f"dqn-test: note: {tmp_path / 'last.h5'} holds only its last network (model): playing it"
        else:
            assert "holds only" not in note
    plays = list(played.values())
    # float16 copies: the same actions as the float32 networks they were made from, Q-values within 0.1%
    assert plays[0] != plays[1]
    for copy, original in ((plays[2], plays[1]), (plays[3], plays[1]), (plays[4], plays[0])):
        assert [r[0] for r in copy] == [r[0] for r in original]
        assert np.allclose(copy, original, rtol=1e-3, atol=1e-4)
    with pytest.raises(HistoryError, match="no model stored"):  # without only=, as dqn-train loads it
        load_network(str(tmp_path / "best.h5"))
    for args, error in ((["--network", tmp_path / "none.h5"], "no model stored"),
                        (["--network", tmp_path / "none.h5", "--best"], "no best_model stored")):
        assert_bad_input(dqn_test("--game", "pong", *args), error)


def test_bad_input(tmp_path, networks, weights, monkeypatch):
    h5, t7 = networks
    assert_bad_input(dqn_test("--game", "breakout", "--network", h5), "6 actions", "breakout has 4")
    assert_bad_input(dqn_test("-env", "breakout", "-network", t7), "6 actions", "breakout has 4")
    (tmp_path / "net.txt").write_text("x")
    assert_bad_input(dqn_test("--game", "pong", "--network", tmp_path / "net.txt"), "expected a .h5 history")
    assert_bad_input(dqn_test("--game", "pong", "--network", tmp_path / "run.ckpt"),
                     f"{tmp_path / 'run.ckpt'} is a checkpoint, for dqn-train --resume; its run's networks are in the "
                     f"history written beside it, {tmp_path / 'run.h5'}")
    assert_bad_input(dqn_test("--game", "pong", "--network", tmp_path / "none.h5"), "no such file")
    assert_bad_input(dqn_test("--game", "pong", "--network", " "), "no network file given (the path ' ' is blank)")
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--gif-file", tmp_path / "no" / "x.gif"),
                     "cannot write --gif-file", "no folder")
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--csv-file", tmp_path), "it is a folder")
    # Tried, not asked: os.access lets root write in /proc.
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--csv-file", "/proc/x.csv"),
                     "cannot write --csv-file /proc/x.csv: folder /proc: ")
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--video", tmp_path / "x.avi"), ".mp4")
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--gif-file", tmp_path / "x.png"), "use a .gif file")
    assert_bad_input(dqn_test("--game", "pongg", "--network", h5), "unknown game")
    assert_bad_input(dqn_test("--network", h5), "no game given: use --game")  # its history stores none
    # A blank --game is the user's error, not the history's; a missing vector is missing, --best or not.
    assert_bad_input(dqn_test("--game", "", "--network", h5), ": error: no game given")
    assert_bad_input(dqn_test("--game", "pong", "--network", tmp_path / "none.params.h5", "--best"),
                     "none.params.h5: no such file")
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--pool-frms", 'type="min"'), "pool_type", "min")
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--pool-frms", "size="), "--pool-frms", "malformed")
    for i, (stored, error) in enumerate(((dict(actrep=0), "actrep must be positive"),
                                         (dict(pool_type="min"), "pool_type must be one of"),
                                         (dict(game="pongg"), "unknown game"))):
        foreign = tmp_path / f"foreign{i}.h5"
        write_history(foreign, weights, {"hist_len": 4, "game": "pong", **stored})
        assert_bad_input(dqn_test("--network", foreign), f"{foreign}: {error}")  # names the file of the value
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--pool-frms", "size=1e9"), "do not fit in memory")
    result = dqn_test("--game", "pong", "--network", h5, "--testing-ep", "nan")  # a click usage error
    assert result.exit_code == 2 and "'-testing_ep': 'nan' is not a finite number" in result.stderr
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    assert_bad_input(dqn_test("--game", "pong", "--network", h5, "--video", tmp_path / "x.mp4"),
                     "pip install imageio-ffmpeg")
    assert not list(tmp_path.glob(".*tmp*"))


def test_outputs_replace_no_other_file(tmp_path, networks):
    run = tmp_path / "run.h5"
    shutil.copy(networks[0], run)
    before = run.read_bytes()
    assert_bad_input(dqn_test(*BASE, "--network", run, "--csv-file", run),
                     f"--csv-file {run} exists and is not a .csv file")
    assert run.read_bytes() == before
    assert_bad_input(dqn_test(*BASE, "--network", run, "--csv-file", tmp_path / "x.gif", "--gif-file",
                              tmp_path / "x.gif"), "--csv-file", "is also the --gif-file")
    assert_bad_input(dqn_test(*BASE, "--network", run, "--gif-file", ""), "cannot write --gif-file : give a file name")
    assert sorted(os.listdir(tmp_path)) == ["run.h5"]


def test_csv_to_stdout_keeps_the_rest_of_stdout(tmp_path, networks):
    command = [shutil.which("dqn-test"), "--network", str(networks[0]), *map(str, BASE), "--max-steps", "2",
               "--csv-file", "/dev/stdout"]
    piped = subprocess.run(command, capture_output=True, text=True)
    with open(tmp_path / "out.txt", "w") as fh:  # /dev/stdout is then a link to out.txt
        subprocess.run(command, stdout=fh, stderr=subprocess.PIPE)
    for out in (piped.stdout, (tmp_path / "out.txt").read_text()):
        assert "episode,step,action,reward,q_NOOP," in out and len(re.findall(r"^0,\d,", out, re.M)) == 2
        assert "Episode 0: score 0, 2 steps, 8 frames" in out and out.endswith("Wrote /dev/stdout\n")
    assert os.listdir(tmp_path) == ["out.txt"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_one_line(networks):
    result = dqn_test(*BASE, "--network", networks[0], "--csv-file", "/dev/full")
    assert result.exit_code == 1
    assert result.stderr.endswith(": error: cannot write the output files: No space left on device\n")
    assert not os.path.isfile("/dev/full")  # written to, not replaced


def test_each_episode_after_the_first_starts_with_next_random_game(weights, single_threaded):
    """As train_agent.lua's evaluation: newGame() once, then nextRandomGame() per later episode."""
    calls = []

    class Recorded(GameEnvironment):  # the real emulator; the calls play makes, not those they make
        inside = False

        def new_game(self):
            if not self.inside:
                calls.append("new_game")
            return super().new_game()

        def next_random_game(self, k=None):
            calls.append("next_random_game")
            self.inside = True
            try:
                return super().next_random_game(k)
            finally:
                self.inside = False

    env = Recorded("pong", seed=3)
    agent = NeuralQLearner(env.get_actions(), seed=3, replay_memory=36, bufferSize=32)
    agent.network.load_state_dict(weights)
    steps = list(play(env, agent, 3, 0.05, 5))
    assert calls == ["new_game", "next_random_game", "next_random_game"]
    assert [(s.episode, s.step) for s in steps] == [(e, i) for e in range(3) for i in range(5)]
    assert [s.episode_end.steps for s in steps if s.episode_end] == [5, 5, 5]


def test_the_testing_ep_option_is_the_exploration_rate(tmp_path, networks):
    greedy = {}
    for epsilon in (0, 1):
        table = tmp_path / f"ep{epsilon}.csv"
        result = dqn_test(*BASE[:2], "--max-steps", 200, "--network", networks[0], "--testing-ep", epsilon,
                          "--csv-file", table)
        assert result.exit_code == 0, result.output
        with open(table, newline="") as fh:
            rows = list(csv.reader(fh))[1:]
        q = np.array([[float(x) for x in r[4:]] for r in rows])
        greedy[epsilon] = (np.array([int(r[2]) for r in rows]) == q.argmax(1)).mean()
    assert greedy[0] == 1.0  # every action the argmax of its Q-values
    assert greedy[1] < 0.5  # uniformly random: about 1 in 6


def test_video_frame_rates(tmp_path, networks, iio):
    """Every emulator frame plays at the game's 60 fps; one per agent step at 60/actrep."""
    pytest.importorskip("imageio_ffmpeg")
    for args, fps, frames in (([], 60, 120), (["--frame-skip"], 15, 30)):
        video = tmp_path / "play.mp4"
        result = dqn_test(*BASE[:2], "--max-steps", 30, "--network", networks[0], "--video", video, *args)
        assert result.exit_code == 0, result.output
        assert iio.immeta(video, plugin="FFMPEG")["fps"] == fps
        assert iio.imread(video, index=None, plugin="FFMPEG").shape[0] == frames


def test_mean_and_std_over_the_episodes(networks):
    result = dqn_test(*BASE[:2], "--max-steps", 250, "--episodes", 3, "--testing-ep", 1, "--network", networks[0])
    assert result.exit_code == 0, result.output
    scores = np.array([float(m[1]) for m in EPISODE_LINE.findall(result.output)])
    assert len(scores) == 3 and len(set(scores)) > 1 and np.mean(scores) != np.median(scores)
    assert f"Mean score {scores.mean():g}, std {scores.std():g} over 3 episode(s)" in result.output


def test_the_nature_protocol_starts_after_1_to_30_no_op_frames_and_cuts_at_the_cap(weights, single_threaded):
    """Every episode, the first too, starts after 1..30 no-op frames (as the emulator counts its
    episode's frames before the agent's first action, seen through the game's frame_hook); an
    untrained network's Pong episodes outlast the cap, and each stops at exactly the cap's frames."""
    protocol = dataclasses.replace(NATURE, episodes=4, max_frames=120)
    env = GameEnvironment("pong", random_starts=protocol.random_starts, seed=5)
    numbers = []  # the emulator's frame number in its episode, of each frame: 0 after a reset
    env.frame_hook = lambda frame: numbers.append(env.ale.getEpisodeFrameNumber())
    starts, played, ends = [], [], []
    for s in protocol.play(env, agent_for(weights, env.get_actions(), seed=5)):
        first, last = numbers[-len(s.frames)], numbers[-1]  # the frames of this agent step
        if s.step == 0:
            starts.append(first - 1)
            assert numbers[-len(s.frames) - first] == 0  # the reset that started the game
        if s.episode_end:
            played.append(last - starts[-1])
            ends.append(s.episode_end)
    assert len(ends) == 4 and all(1 <= k <= 30 for k in starts) and len(set(starts)) > 2, starts
    assert played == [120] * 4
    assert [(e.steps, e.frames, e.finished) for e in ends] == [(30, 120, False)] * 4
    assert env.frame_hook is not None  # a caller's hook is kept

    # evaluate() plays the same; a cap that actrep does not divide stops after the steps that fit in it
    env = GameEnvironment("pong", random_starts=protocol.random_starts, seed=5)
    result = evaluate(env, agent_for(weights, env.get_actions(), seed=5), protocol)
    assert result.episodes == ends and result.cut == 4
    assert np.array_equal(result.scores, [e.score for e in ends])
    assert "4 of 4 cut at 120 frames" in result.summary().splitlines()[0]
    env = GameEnvironment("pong", random_starts=protocol.random_starts, seed=5)
    result = evaluate(env, agent_for(weights, env.get_actions()), dataclasses.replace(protocol, episodes=1,
                                                                                         max_frames=123))
    assert [(e.steps, e.frames) for e in result.episodes] == [(30, 120)]
    with pytest.raises(ValueError, match="make it with random_starts=30"):
        evaluate(GameEnvironment("pong", random_starts=5), agent_for(weights, [0, 1, 3, 4, 11, 12]))


def test_protocol_nature_on_the_command_line(tmp_path, weights):
    """--protocol nature plays 30 episodes of at most 18000 frames after 1..30 no-op frames at
    epsilon 0.05, whatever the network's run stored; options given with it override those and
    the protocol played is printed; the summary compares the mean with the reference scores."""
    assert (NATURE.episodes, NATURE.max_frames, NATURE.testing_ep, NATURE.random_starts) == (30, 18000, 0.05, 30)
    h5 = tmp_path / "run.h5"
    write_history(h5, weights, {"hist_len": 4, "game": "pong", "random_starts": 5})
    proc = subprocess.Popen([shutil.which("dqn-test"), "--network", str(h5), "--protocol", "nature"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    proc.send_signal(signal.SIGINT)  # the protocol is printed before the first episode
    proc.communicate(timeout=120)
    assert line == ("dqn-test: protocol nature: 30 episode(s) of at most 18000 frames (4500 agent steps), each "
                    "after 1..30 no-op frames, epsilon 0.05\n")
    assert proc.returncode == 130

    result = dqn_test("--network", h5, "--protocol", "nature", "--episodes", 3, "--max-steps", 40,
                      "-random_starts", 7, "--testing-ep", 1)
    assert result.exit_code == 0, result.output
    assert result.stderr == ("dqn-test: protocol nature, changed by --episodes, --testing-ep, --random-starts, "
                             "--max-steps: 3 episode(s) of at most 40 agent steps, each after 1..7 no-op frames, "
                             "epsilon 1\n")
    episodes = EPISODE_LINE.findall(result.output)
    assert [(e[0], e[2], e[3]) for e in episodes] == [(str(i), "40", "160") for i in range(3)]
    assert result.output.count("(cut at 40 agent steps)") == 3
    scores = np.array([float(e[1]) for e in episodes])
    summary = result.output.splitlines()[-3:]
    assert summary == [
        f"Protocol nature, pong: 3 episode(s), mean score {scores.mean():g}, std {scores.std():g}, "
        f"min {scores.min():g}, max {scores.max():g}; 3 of 3 cut at 40 agent steps",
        f"Human-normalised score: {100 * (scores.mean() + 20.7) / (14.6 + 20.7):.1f}% (random -20.7, human 14.6)",
        "Nature DQN score: 18.9 (std 1.3)"]
    assert_bad_input(dqn_test("--network", h5, "--protocol", "nature", "--actrep", 20000), "--actrep 20000",
                     "longer than protocol nature's cap of 18000 frames")
