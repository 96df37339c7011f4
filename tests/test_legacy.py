"""DQN 3.0 ``.t7`` files: snapshots and ``.params.t7`` vectors, written byte by byte by
``t7writer`` (no Lua here), read back into convnet_atari3 and converted to ``.h5`` histories."""
import os
import resource
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

import t7writer
from helpers import assert_bad_input
from dqn_nature.config import resolve
from dqn_nature.commands.convert import convert_command as convert_main
from dqn_nature.history import HistoryError, load_history
from dqn_nature.convnet import convnet_atari3
from dqn_nature.network_files import load_network
from dqn_nature.torch7 import LegacyError, convert_arguments, load_snapshot, load_t7_network, params_state, read_t7

pytest.importorskip("torchfile")

AGENT_PARAMS = dict(lr=0.00025, ep=1, ep_end=0.1, ep_endt=1000000, discount=0.99, hist_len=4, learn_start=50000,
                    replay_memory=1000000, update_freq=4, n_replay=1, network="convnet_atari3",
                    preproc="net_downsample_2x_full_y", state_dim=7056, minibatch_size=32, rescale_r=1, ncols=1,
                    bufferSize=512, valid_size=500, target_q=10000, clip_delta=1, min_reward=-1, max_reward=1,
                    gpu=0, verbose=2)
# The arguments table as train_agent.lua saves it after initenv's setup (gpu: cutorch's 1-based id).
ARGUMENTS = dict(framework="alewrap", env="pong", game_path="", env_params={"useRGB": True},
                 pool_frms={"type": "max", "size": 2}, actrep=4, random_starts=30, name="DQN3_0_1_pong_FULL_Y",
                 network="", agent="NeuralQLearner", agent_params=AGENT_PARAMS, seed=1, saveNetworkParams=False,
                 prog_freq=10000, save_freq=20000, eval_freq=20000, save_versions=0, steps=50000000,
                 eval_steps=125000, verbose=2, threads=4, gpu=1, tensorType="torch.FloatTensor")
HISTORIES = dict(reward_history=[-21.0, -20.5, -18.25], reward_counts=[21, 22, 25], episode_counts=[6, 6, 5],
                 time_history=[0, 101.5, 203.25, 305.0], v_history=[0.012, 0.11, 0.25], td_history=[0.5, 0.25, 0.125],
                 qmax_history=[1, 1, 1])


def random_weights(n_actions=6, seed=0):
    """convnet_atari3 parameters as float32 numpy arrays, conv weights (out, in, kh, kw)."""
    torch.manual_seed(seed)
    return {k: v.numpy().copy() for k, v in convnet_atari3(n_actions).state_dict().items()}


def direct_q(w, x, layout="4d"):
    """Q-values of inputs x (N, 4, 84, 84) computed from Torch7-layout arrays with torch.nn.functional.

    layout: "4d" conv weights (out, in, kh, kw) via conv2d; "2d" (out, in*kh*kw) and "cuda"
    (in, kh, kw, out) via unfold and a matrix product, as SpatialConvolutionMM computes."""
    h = x
    for name, (k, s, p) in (("conv1", (8, 4, 1)), ("conv2", (4, 2, 0)), ("conv3", (3, 1, 0))):
        weight, bias = torch.from_numpy(w[f"{name}.weight"]), torch.from_numpy(w[f"{name}.bias"])
        if layout == "4d":
            h = F.conv2d(h, weight, bias, stride=s, padding=p)
        else:
            w2 = weight if layout == "2d" else weight.reshape(-1, weight.shape[-1]).T
            side = (h.shape[-1] + 2 * p - k) // s + 1
            cols = F.unfold(h, k, padding=p, stride=s)
            h = (w2 @ cols + bias[:, None]).reshape(len(x), -1, side, side)
        h = F.relu(h)
    h = F.relu(F.linear(h.flatten(1), torch.from_numpy(w["fc1.weight"]), torch.from_numpy(w["fc1.bias"])))
    return F.linear(h, torch.from_numpy(w["fc2.weight"]), torch.from_numpy(w["fc2.bias"]))


def stored(w, layout):
    """The conv weights of ``w`` as a Torch7 network of that layout stores them."""
    out = dict(w)
    for name in ("conv1", "conv2", "conv3"):
        a = w[f"{name}.weight"]
        if layout == "2d":
            out[f"{name}.weight"] = a.reshape(len(a), -1)
        elif layout == "cuda":
            out[f"{name}.weight"] = a.transpose(1, 2, 3, 0)
    return out


def q_of(state, x):
    net = convnet_atari3(state["fc2.weight"].shape[0])
    net.load_state_dict(state)
    with torch.no_grad():
        return net(x)


def snapshot(model, best_model=None, arguments=ARGUMENTS):
    """The table train_agent.lua saves (a Lua table holds no nil: no best_model before an evaluation)."""
    data = {"agent": t7writer.Module("dqn.NeuralQLearner", numSteps=100000, network=model, lr=0.00025),
            "model": model, "best_model": best_model, **HISTORIES, "arguments": arguments}
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture(scope="module")
def weights():
    return random_weights()


@pytest.fixture(scope="module")
def inputs():
    return torch.rand(3, 4, 84, 84, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def snapshot_path(tmp_path_factory, weights):
    path = tmp_path_factory.mktemp("t7") / "DQN3_0_1_pong_FULL_Y.t7"
    t7writer.save(path, snapshot(t7writer.dqn_network(weights), t7writer.dqn_network(random_weights(seed=1))))
    return str(path)


def run(main, *args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.mark.parametrize("layout", ["4d", "2d", "cuda"])
def test_network_gives_the_stored_weights_q_values(tmp_path, weights, inputs, layout):
    raw = stored(weights, layout)
    path = tmp_path / "net.t7"
    conv = "nn.SpatialConvolutionMM" if layout == "2d" else "nn.SpatialConvolution"
    network = t7writer.dqn_network(weights, conv=conv, weight_2d=layout == "2d", cuda=layout == "cuda")
    t7writer.save(path, snapshot(network))
    expected = direct_q(raw, inputs, layout)
    assert torch.allclose(q_of(load_t7_network(str(path))[0], inputs), expected, atol=1e-5)
    assert torch.allclose(q_of(load_network(str(path))[0], inputs), expected, atol=1e-5)


def test_snapshot_histories_and_arguments_arrive(tmp_path, snapshot_path, weights, inputs):
    snap = load_snapshot(snapshot_path)
    assert snap.game == "pong" and snap.steps == 100000
    assert load_network(snapshot_path)[1] == snap.arguments  # what dqn-test takes its defaults from
    for key, values in HISTORIES.items():
        assert snap.history[key] == values
    # evaluations at the steps s with s % eval_freq == 0 and s > learn_start
    assert snap.history["step_history"] == [60000, 80000, 100000]

    out = tmp_path / "pong.h5"
    result = run(convert_main, snapshot_path, out)
    assert result.exit_code == 0, result.output
    assert "3 evaluations" in result.output and "best reward -18.25" in result.output
    h = load_history(str(out))
    assert h.game == "pong" and h.steps == 100000 and h.frames == 400000
    assert h.attrs["converted_from"] == snapshot_path and h.attrs["source"] == "DQN 3.0 .t7"
    for key, values in HISTORIES.items():
        np.testing.assert_array_equal(getattr(h, key), values)
    np.testing.assert_array_equal(h.step_history, [60000, 80000, 100000])
    a = h.arguments
    assert a["game"] == "pong" and a["framework"] == "alewrap" and a["name"] == "DQN3_0_1_pong_FULL_Y"
    assert a["lr"] == 0.00025 and a["ep"] == 1.0 and a["learn_start"] == 50000 and a["buffer_size"] == 512
    assert a["rescale_r"] is True and a["save_network_params"] is False and a["clip_delta"] == 1.0
    assert a["pool_type"] == "max" and a["pool_size"] == 2 and a["env_params"] == "useRGB=true"
    assert a["gpu"] == 0 and a["network"] is None and a["game_path"] is None and a["hist_len"] == 4
    assert a["tensorType"] == "torch.FloatTensor"  # no counterpart: kept under its Lua name
    assert torch.allclose(h.load_network()(inputs), direct_q(weights, inputs), atol=1e-5)
    best = random_weights(seed=1)
    assert torch.allclose(q_of(load_network(str(out), best=True)[0], inputs), direct_q(best, inputs), atol=1e-5)
    assert torch.allclose(q_of(load_network(snapshot_path, best=True)[0], inputs), direct_q(best, inputs), atol=1e-5)


def test_arguments_follow_lua_rules():
    a = convert_arguments({"agent_params": {**AGENT_PARAMS, "rescale_r": 0}, "pool_frms": {"type": "mean", "size": 3},
                           "game_path": "", "name": "run"}, "s.t7")
    assert a["rescale_r"] is True  # in Lua 0 is true
    assert (a["pool_type"], a["pool_size"]) == ("mean", 3)
    assert a["game_path"] is None and a["name"] == "run"  # '' is an option not given
    assert "network" not in a  # agent_params' network="convnet_atari3" is the architecture, not a file
    assert convert_arguments({"agent_params": {"rescale_r": False}}, "s.t7")["rescale_r"] is False


def test_step_history_without_eval_freq_takes_train_agent_lua_s_default(tmp_path, weights):
    arguments = {k: v for k, v in ARGUMENTS.items() if k != "eval_freq"}  # learn_start 50000
    t7writer.save(tmp_path / "s.t7", snapshot(t7writer.dqn_network(weights), arguments=arguments))
    assert load_snapshot(str(tmp_path / "s.t7")).history["step_history"] == [60000, 70000, 80000]


@pytest.mark.parametrize("actrep, frames", [(3, 300000), (None, 100000)])  # train_agent.lua's default: 1
def test_frames_are_steps_times_actrep(tmp_path, weights, actrep, frames):
    arguments = {k: v for k, v in {**ARGUMENTS, "actrep": actrep}.items() if v is not None}
    t7writer.save(tmp_path / "s.t7", snapshot(t7writer.dqn_network(weights), arguments=arguments))
    assert run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5").exit_code == 0
    h = load_history(str(tmp_path / "x.h5"))
    assert (h.steps, h.frames) == (100000, frames)


def flat_vector(w, cuda=False):
    """Torch7's getParameters() order: each layer's weight then bias, in its memory layout."""
    parts = []
    for name in ("conv1", "conv2", "conv3", "fc1", "fc2"):
        weight = w[f"{name}.weight"]
        parts += [weight.transpose(1, 2, 3, 0) if cuda and name.startswith("conv") else weight, w[f"{name}.bias"]]
    return np.concatenate([p.reshape(-1) for p in parts])


@pytest.fixture(scope="module")
def params_path(tmp_path_factory, weights):
    path = tmp_path_factory.mktemp("params") / "DQN3_0_1_pong_FULL_Y.params.t7"
    t7writer.save(path, {"network": t7writer.Tensor(flat_vector(weights))}, ascii=True)
    return str(path)


def test_params_vector_maps_onto_the_layers(tmp_path, params_path, weights, inputs):
    assert open(params_path, "rb").read(2) == b"3\n"  # ascii, as train_agent.lua writes it
    state, arguments = load_t7_network(params_path)
    assert arguments == {}
    for key, value in weights.items():
        np.testing.assert_array_equal(state[key].numpy(), value, err_msg=key)
    cuda = params_state(flat_vector(weights, cuda=True), "v", 6, cuda_conv=True)
    for key, value in weights.items():
        np.testing.assert_array_equal(cuda[key].numpy(), value, err_msg=key)

    out = tmp_path / "params.h5"
    result = run(convert_main, params_path, out, "-game", "pong")
    assert result.exit_code == 0, result.output
    h = load_history(str(out))
    assert h.game == "pong" and h.attrs["source"] == "DQN 3.0 .t7" and len(h.reward_history) == 0
    assert (h.steps, h.frames, h.arguments["hist_len"]) == (0, 0, 4)
    assert torch.allclose(h.load_network()(inputs), direct_q(weights, inputs), atol=1e-5)

    assert_bad_input(run(convert_main, params_path, tmp_path / "x.h5", "--n-actions", "4"), "4 actions")
    assert_bad_input(run(convert_main, params_path, tmp_path / "x.h5", "--n-actions", "6"),
                     "a parameter vector names no game; give one with --game")  # no history without a game
    assert not (tmp_path / "x.h5").exists()
    assert_bad_input(run(convert_main, params_path, tmp_path / "x.h5", "--game", "breakout"), "breakout")


def test_dqn_train_starts_from_a_t7_network(snapshot_path, weights):
    from dqn_nature.train import Trainer

    config = resolve(dict(game="pong", network=snapshot_path, gpu=-1, replay_memory=2000, learn_start=600,
                          verbose=0))
    trainer = Trainer(config, -1)
    for key, value in weights.items():
        np.testing.assert_array_equal(trainer.agent.network.state_dict()[key].cpu().numpy(), value, err_msg=key)
        np.testing.assert_array_equal(trainer.agent.target_network.state_dict()[key].cpu().numpy(), value)


def test_dqn_train_refuses_a_bad_t7(tmp_path, weights):
    from dqn_nature.commands.train import train

    def refused(*args):
        result = run(train, "--game", "pong", "--gpu", "-1", "--replay-memory", "2000", "--learn-start", "600", *args)
        assert result.stdout == ""  # before the arguments' listing
        return result

    t7writer.save(tmp_path / "s.t7", snapshot(t7writer.dqn_network(random_weights(n_actions=4))))
    assert_bad_input(refused("-network", tmp_path / "s.t7"), "its network has 4 actions but pong has 6")
    t7writer.save(tmp_path / "h.t7", snapshot(t7writer.dqn_network(random_weights())))
    assert_bad_input(refused("--hist-len", "2", "-network", tmp_path / "h.t7"),
                     "its network takes 4 frames per state but hist_len x ncols is 2")
    (tmp_path / "junk.t7").write_bytes(b"\x07\x00\x00\x00")
    assert_bad_input(refused("--network", tmp_path / "junk.t7"), "not a readable Torch7 file")


def test_not_a_snapshot(tmp_path):
    t7writer.save(tmp_path / "table.t7", {"foo": 1, "bar": t7writer.Tensor(np.zeros(3))})
    assert_bad_input(run(convert_main, tmp_path / "table.t7", tmp_path / "x.h5"),
                     "not a DQN 3.0 snapshot", "found a table with keys bar, foo")
    t7writer.save(tmp_path / "tensor.t7", t7writer.Tensor(np.zeros((2, 3))))
    assert_bad_input(run(convert_main, tmp_path / "tensor.t7", tmp_path / "x.h5"), "2, 3")
    (tmp_path / "junk.t7").write_bytes(b"\x07\x00\x00\x00garbage")
    assert_bad_input(run(convert_main, tmp_path / "junk.t7", tmp_path / "x.h5"), "not a readable Torch7 file")
    assert not (tmp_path / "x.h5").exists()


def test_other_networks_are_refused(tmp_path, weights):
    net = t7writer.dqn_network(weights)
    net.fields["modules"].insert(3, t7writer.Module("nn.Tanh"))
    t7writer.save(tmp_path / "tanh.t7", snapshot(net))
    assert_bad_input(run(convert_main, tmp_path / "tanh.t7", tmp_path / "x.h5"), "nn.Tanh")
    net = t7writer.dqn_network(weights)
    net.fields["modules"][1].fields.update(padW=0, padH=0)
    t7writer.save(tmp_path / "nopad.t7", snapshot(net))
    assert_bad_input(run(convert_main, tmp_path / "nopad.t7", tmp_path / "x.h5"), "padding (0, 0)")
    net.fields["modules"] = 5
    t7writer.save(tmp_path / "nolayers.t7", snapshot(net))
    assert_bad_input(run(convert_main, tmp_path / "nolayers.t7", tmp_path / "x.h5"),
                     "model: its modules are an int 5, not a list of layers")
    net = t7writer.dqn_network({**weights, "fc2.weight": np.zeros((0, 512)), "fc2.bias": np.zeros(0)})
    t7writer.save(tmp_path / "noactions.t7", snapshot(net))
    assert_bad_input(run(convert_main, tmp_path / "noactions.t7", tmp_path / "x.h5"), "its fc2.weight is empty")


def test_action_count_must_match_the_game(tmp_path, weights):
    breakout = {**ARGUMENTS, "env": "breakout"}
    t7writer.save(tmp_path / "s.t7", snapshot(t7writer.dqn_network(weights), arguments=breakout))
    assert_bad_input(run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5"), "6 actions", "breakout has 4")
    result = run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5", "--game", "pong")  # --game overrides env
    assert result.exit_code == 0 and load_history(str(tmp_path / "x.h5")).game == "pong"


def test_n_actions_must_match_a_snapshots_network(tmp_path, snapshot_path):
    assert_bad_input(run(convert_main, snapshot_path, tmp_path / "x.h5", "--n-actions", "4"),
                     "its network has 6 actions but --n-actions is 4")
    assert run(convert_main, snapshot_path, tmp_path / "x.h5", "--n-actions", "6").exit_code == 0


@pytest.mark.parametrize("key, value, message", [
    ("eval_freq", "often", "eval_freq is a str 'often', not a whole number"),
    ("actrep", "four", "actrep is a str 'four', not a whole number"),
    ("env", 5, "env is an int 5, not a string"),
    ("eval_freq", 1e300, "eval_freq is a float 1e+300, not a whole number up to 2^53"),
    ("actrep", float("nan"), "actrep is a float nan, not a whole number"),
    ("gpu", "x", "gpu is a str 'x', not a whole number"),
    ("lr", True, "lr is a bool True, not a number"),
    ("extra", t7writer.Tensor(np.zeros(2)), "extra is a tensor of shape (2,), not a number, string, boolean or table"),
    (5, 1, "arguments has an int 5 as a key, not an option name"),
])
def test_arguments_of_the_wrong_type(tmp_path, weights, key, value, message):
    t7writer.save(tmp_path / "s.t7", snapshot(t7writer.dqn_network(weights), arguments={**ARGUMENTS, key: value}))
    assert_bad_input(run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5"), f"s.t7: {message}")


def numsteps(n):
    return t7writer.Module("dqn.NeuralQLearner", numSteps=n)


@pytest.mark.parametrize("fields, message", [
    (dict(v_history=[[1, 2], [3], [4]]), "v_history[1] is a list of 2 values, not a number"),
    (dict(reward_history=[-21, "x", -18]), "reward_history[2] is a str 'x', not a number"),
    (dict(td_history=[True, False, True]), "td_history[1] is a bool True, not a number"),
    (dict(reward_counts=[21, -1, 25]), "reward_counts[2] is an int -1, not a whole number from 0"),
    (dict(episode_counts=[6, float("nan"), 5]), "episode_counts[2] is a float nan, not a whole number from 0"),
    (dict(episode_counts={1: 6, 3: 5}), "episode_counts[2] is nothing, not a whole number from 0"),  # a hole
    (dict(agent=numsteps(1e300)), "agent.numSteps is a float 1e+300, not a whole number from 1 to 2^53"),
    (dict(agent=numsteps(2**53), arguments={**ARGUMENTS, "actrep": 2**11}), "frames (steps x actrep) is an int"),
    (dict(arguments={**ARGUMENTS, "eval_freq": 2**52, "agent_params": {**AGENT_PARAMS, "learn_start": 2**53}}),
     "the last evaluation's step (from eval_freq and learn_start) is an int"),
])
def test_snapshot_fields_of_the_wrong_type(tmp_path, weights, fields, message):
    t7writer.save(tmp_path / "s.t7", {**snapshot(t7writer.dqn_network(weights)), **fields})
    assert_bad_input(run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5"), f"s.t7: {message}")


@pytest.mark.parametrize("fields, message", [
    (dict(v_history=[0.012, 0.11]), "v_history has 2 entries for reward_history's 3 evaluations"),
    (dict(time_history=[101.5, 203.25, 305.0]), "time_history has 3 entries for reward_history's 3"),
    (dict(td_history=None, qmax_history=[1, 1, 1, 1]), "td_history has 0, qmax_history has 4 entries"),
])
def test_uneven_histories_are_refused(tmp_path, weights, fields, message):
    t7writer.save(tmp_path / "s.t7", {k: v for k, v in {**snapshot(t7writer.dqn_network(weights)), **fields}.items()
                                      if v is not None})
    assert_bad_input(run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5"), f"s.t7: uneven histories: {message}")
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.parametrize("ascii", [False, True])
def test_a_sparse_history_is_refused(tmp_path, weights, ascii):
    """A table of few entries at far indices is no list: as one up to its last index, {[1e15]=1} took memory
    without limit."""
    for history, found in [({1: -21, 5: -18}, "indices up to 5 and 2"), ({10**6: -21}, "indices up to 1000000 and 1")]:
        t7writer.save(tmp_path / "s.t7", {**snapshot(t7writer.dqn_network(weights)), "reward_history": history},
                      ascii=ascii)
        assert_bad_input(run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5"),
                         f"s.t7: reward_history is a table with {found} of them set, not a list of numbers")


def test_a_snapshot_before_its_first_evaluation_converts(tmp_path, weights):
    fresh = {**snapshot(t7writer.dqn_network(weights)), **{key: [] for key in HISTORIES}, "time_history": [0]}
    t7writer.save(tmp_path / "s.t7", fresh)  # as train_agent.lua saves it: time_history[1] = 0
    assert run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5").exit_code == 0
    h = load_history(str(tmp_path / "x.h5"))
    assert len(h.step_history) == 0 and list(h.time_history) == [0] and h.steps == 100000


def test_file_kinds_and_output_paths(tmp_path, snapshot_path):
    (tmp_path / "net.txt").write_text("x")
    with pytest.raises(HistoryError, match="expected a .h5 history, a .params.h5 vector or a DQN 3.0 .t7"):
        load_network(str(tmp_path / "net.txt"))
    assert_bad_input(run(convert_main, tmp_path / "net.txt", tmp_path / "x.h5"), "not a .t7 file")
    (tmp_path / "RUN.T7").write_bytes(open(snapshot_path, "rb").read())
    assert run(convert_main, tmp_path / "RUN.T7", tmp_path / "run.h5").exit_code == 0  # any case, as dqn-test
    assert_bad_input(run(convert_main, tmp_path / "none.t7", tmp_path / "x.h5"), "none.t7", "cannot read")
    assert_bad_input(run(convert_main, snapshot_path, tmp_path / "no" / "x.h5"), "cannot write", "no folder")
    full = subprocess.run(["dqn-convert", snapshot_path, str(tmp_path / "full.h5")], capture_output=True, text=True,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192)))  # a full disk
    assert (full.returncode, full.stderr) == (1, f"dqn-convert: error: cannot write {tmp_path / 'full.h5'}: "
                                                 "File too large\n")  # 1: the write failed, 2: bad input
    assert_bad_input(run(convert_main, snapshot_path, tmp_path / "x.t7"), "name the output file <name>.h5")
    (tmp_path / "mine.h5").write_text("a user's file")
    assert_bad_input(run(convert_main, snapshot_path, tmp_path / "mine.h5"), "mine.h5 exists", "--overwrite")
    assert (tmp_path / "mine.h5").read_text() == "a user's file"
    assert run(convert_main, snapshot_path, tmp_path / "mine.h5", "--overwrite").exit_code == 0
    assert load_history(str(tmp_path / "mine.h5")).game == "pong"
    t7writer.save(tmp_path / "nobest.t7", snapshot(t7writer.dqn_network(random_weights())))
    with pytest.raises(LegacyError, match="no best_model"):
        load_network(str(tmp_path / "nobest.t7"), best=True)


def test_torchfile_missing(tmp_path, snapshot_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchfile", None)
    assert_bad_input(run(convert_main, snapshot_path, tmp_path / "x.h5"), "pip install 'dqn-nature[legacy]'")


def test_reader_follows_references_and_ascii(tmp_path):
    shared = t7writer.Tensor(np.arange(6).reshape(2, 3))
    obj = {"a": [1, 2.5, "x", True], "t": shared, "again": shared, "empty": t7writer.Tensor(None), "s": ""}
    for ascii in (False, True):
        t7writer.save(tmp_path / "o.t7", obj, ascii=ascii)
        back = read_t7(str(tmp_path / "o.t7"))
        assert back["a"] == [1, 2.5, "x", True] and back["s"] == "" and back["empty"].size == 0
        np.testing.assert_array_equal(back["again"], np.arange(6).reshape(2, 3))
        assert back["again"] is back["t"]


@pytest.mark.parametrize("ascii", [False, True])
def test_a_tensor_outside_its_storage_is_refused(tmp_path, ascii):
    """Sizes, strides and offset come from the file: a damaged one must not give a view of other memory."""
    for layout, found in [
        (([1687206], [1], 1), "size (1687206,), stride (1,) and offset 1"),  # would read on past the 3 values
        (([1687206], [100000], 1), "stride (100000,)"),  # a segmentation fault when converted
        (([3], [1], 0), "offset 0"),  # Torch7's offsets start at 1
        (([3], [-1], 3), "stride (-1,)"),
        (([2, -1], [1, 1], 1), "size (2, -1)"),
    ]:
        t7writer.save(tmp_path / "v.params.t7", {"network": t7writer.Tensor([1, 2, 3], layout=layout)}, ascii=ascii)
        with pytest.raises(LegacyError, match="v.params.t7: not a readable Torch7 file") as e:
            read_t7(str(tmp_path / "v.params.t7"))
        assert found in str(e.value) and "does not lie within its storage of 3 values" in str(e.value)
    t7writer.save(tmp_path / "ok.t7", t7writer.Tensor([1, 2, 3], layout=([2, 2], [0, 2], 1)), ascii=ascii)
    np.testing.assert_array_equal(read_t7(str(tmp_path / "ok.t7")), [[1, 3], [1, 3]])  # up to the last value


def test_dqn_convert_refuses_a_tensor_outside_its_storage(tmp_path):
    path = tmp_path / "v.params.t7"
    t7writer.save(path, {"network": t7writer.Tensor([1, 2, 3], layout=([1687206], [100000], 1))}, ascii=True)
    result = subprocess.run(["dqn-convert", path, tmp_path / "x.h5", "--game", "pong"], capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (2, "")  # not a segmentation fault (-11)
    assert result.stderr == (f"dqn-convert: error: {path}: not a readable Torch7 file (ValueError: a tensor of size "
                             "(1687206,), stride (100000,) and offset 1 does not lie within its storage of 3 values)\n")


def test_dqn_convert_refuses_a_pipe_named_t7(tmp_path):
    os.mkfifo(tmp_path / "run.t7")  # reading would wait for a writer
    result = subprocess.run(["dqn-convert", tmp_path / "run.t7", tmp_path / "x.h5"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert result.stderr == f"dqn-convert: error: {tmp_path / 'run.t7'}: not a regular file (a pipe or a device)\n"


def test_the_summary_s_best_reward_is_of_scored_evaluations(tmp_path, weights):
    """A hole at the first evaluation (NaN) made max() of the rewards NaN: "best reward nan";
    an evaluation that finished no episode records a 0 that is no score."""
    for fields, best in [(dict(reward_history={2: -20.5, 3: -18.25}), "best reward -18.25"),
                         (dict(reward_history=[-21.0, -19.0, 0.0], episode_counts=[6, 6, 0]), "best reward -19)"),
                         (dict(episode_counts=[0, 0, 0]), None)]:
        t7writer.save(tmp_path / "s.t7", {**snapshot(t7writer.dqn_network(weights)), **fields})
        result = run(convert_main, tmp_path / "s.t7", tmp_path / "x.h5", "--overwrite")
        assert result.exit_code == 0, result.output
        assert "nan" not in result.output
        assert (best in result.output) if best else "best reward" not in result.output, result.output
