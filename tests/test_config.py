"""Options: the Lua table parser, precedence of the sources, the presets and validation."""
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dqn_nature.config import (Config, ConfigError, agent_params_from_lua, parse_lua_table, pool_frms_from_lua,
                               resolve, validate)

ROOT = Path(__file__).resolve().parent.parent
ARGS = ROOT / "args"
# The agent_params string of DQN 3.0's run_gpu script.
RUN_GPU_AGENT_PARAMS = (
    'lr=0.00025,ep=1,ep_end=0.1,ep_endt=1000000,discount=0.99,hist_len=4,learn_start=50000,'
    'replay_memory=1000000,update_freq=4,n_replay=1,network="convnet_atari3",'
    'preproc="net_downsample_2x_full_y",state_dim=7056,minibatch_size=32,rescale_r=1,ncols=1,'
    'bufferSize=512,valid_size=500,target_q=10000,clip_delta=1,min_reward=-1,max_reward=1')


def test_parse_run_gpu_agent_params():
    values = parse_lua_table(RUN_GPU_AGENT_PARAMS)
    assert len(values) == 22
    assert values["lr"] == 0.00025 and type(values["lr"]) is float
    assert values["ep_endt"] == 1_000_000 and type(values["ep_endt"]) is int
    assert values["min_reward"] == -1 and type(values["min_reward"]) is int
    assert values["network"] == "convnet_atari3"
    assert values["preproc"] == "net_downsample_2x_full_y"
    assert values["bufferSize"] == 512
    assert type(values["rescale_r"]) is int


def test_parse_value_kinds():
    values = parse_lua_table("{a=true, b=false, c=max, d='x y', e=1e-3, f=.5, g=0x10, h=\"p,q\",}")
    assert values == {"a": True, "b": False, "c": "max", "d": "x y", "e": 0.001, "f": 0.5, "g": 16, "h": "p,q"}
    assert type(values["a"]) is bool and type(values["g"]) is int
    assert parse_lua_table("lr=0.1; ep=1;network='a;b'") == {"lr": 0.1, "ep": 1, "network": "a;b"}
    # Lua's tonumber: a leading zero is decimal, 0x hexadecimal.
    assert parse_lua_table("a=0100,b=-010,c=+0x1F,d=00.5") == {"a": 100, "b": -10, "c": 31, "d": 0.5}


@pytest.mark.parametrize("text, bad", [
    ("lr=0.1,,ep=1", ",ep=1"),
    ("lr", "'lr'"),
    ("=3", "=3"),
    ("lr=0.1=2", "0.1=2"),
    ("lr=0.1,ep", "'ep'"),
    ("lr=0.1;;ep=1", ";ep=1"),
    ('lr="0.1', "unterminated string '\"0.1'"),  # not lr 0.
    ("network='a\"", "unterminated string"),
    ('network="a"b', "unterminated string"),
])
def test_parse_rejects_malformed(text, bad):
    with pytest.raises(ConfigError) as err:
        parse_lua_table(text)
    message = str(err.value)
    assert bad in message and "\n" not in message


def test_a_bare_word_is_nil_to_a_number_and_text_to_a_string():
    # The released run_gpu passes ep_endt=replay_memory: a Lua global, nil, so the default holds.
    config = resolve({"game": "pong"}, agent_params="ep_endt=replay_memory,lr=0.001,preproc=net_downsample_2x_full_y")
    assert (config.ep_endt, config.lr, config.preproc) == (1_000_000, 0.001, "net_downsample_2x_full_y")
    assert resolve({"game": "pong"}, pool_frms="type=mean").pool_type == "mean"


def test_unknown_agent_parameter():
    with pytest.raises(ConfigError, match="'lrate'"):
        agent_params_from_lua("lr=0.1,lrate=2")
    # A run option is not an agent parameter.
    with pytest.raises(ConfigError, match="'steps'"):
        resolve({"game": "pong"}, agent_params="steps=10")


def test_agent_params_network_names_architecture_or_file():
    assert "network" not in agent_params_from_lua('network="convnet_atari3"')
    assert agent_params_from_lua('network="runs/old.h5"') == {"network": "runs/old.h5"}


def test_pool_frms():
    assert pool_frms_from_lua('type="max",size=2') == {"pool_type": "max", "pool_size": 2}
    assert pool_frms_from_lua("type=mean,size=3") == {"pool_type": "mean", "pool_size": 3}
    with pytest.raises(ConfigError, match="'kind'"):
        pool_frms_from_lua("kind=max")


@pytest.mark.parametrize("explicit, agent_params, field", [
    ({"steps": "many"}, None, "steps"),
    ({}, "lr=fast", "lr"),
    ({}, "learn_start=1000.5", "learn_start"),
    ({"learn_start": "60000.9"}, None, "learn_start"),
    ({}, "learn_start=inf", "learn_start"),
    ({"steps": "nan"}, None, "steps"),
    pytest.param({}, "lr=1" + "0" * 400, "lr", id="lr-of-401-digits"),
    ({}, "rescale_r=maybe", "rescale_r"),
])
def test_wrong_types_rejected(explicit, agent_params, field):
    with pytest.raises(ConfigError, match=field):
        resolve({"game": "pong", **explicit}, agent_params=agent_params)


def test_precedence(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text("learn_start = 1000\nreplay_memory = 5000\nupdate_freq = 2\nsteps = 7\n")
    c = resolve({"game": "pong", "learn_start": 3000}, str(preset), "learn_start=2000,replay_memory=6000")
    assert c.learn_start == 3000  # explicit wins over agent_params and preset
    assert c.replay_memory == 6000  # agent_params win over the preset
    assert c.update_freq == 2 and c.steps == 7  # the preset wins over the defaults
    assert c.ep_end == 0.1 and c.eval_freq == 250_000  # defaults
    assert c.name == "DQN3_0_1_pong_FULL_Y"


def test_defaults_are_run_gpu():
    defaults = resolve({"game": "pong"})
    assert resolve({"game": "pong"}, agent_params=RUN_GPU_AGENT_PARAMS) == defaults
    assert resolve({"game": "pong"}, str(ARGS / "run_gpu.toml")) == defaults
    assert resolve({"game": "pong"}, pool_frms='type="max",size=2') == defaults
    assert (defaults.actrep, defaults.random_starts, defaults.steps, defaults.eval_freq, defaults.eval_steps,
            defaults.prog_freq, defaults.save_freq, defaults.seed, defaults.threads, defaults.gpu) == (
        4, 30, 50_000_000, 250_000, 125_000, 10_000, 125_000, 1, 4, 0)


def test_run_cpu_differs_in_gpu_and_prog_freq_only():
    gpu = resolve({"game": "pong"}, str(ARGS / "run_gpu.toml")).as_dict()
    cpu = resolve({"game": "pong"}, str(ARGS / "run_cpu.toml")).as_dict()
    assert {k for k in gpu if gpu[k] != cpu[k]} == {"gpu", "prog_freq"}
    assert (cpu["gpu"], cpu["prog_freq"]) == (-1, 5000)


def test_preset_rejects_unknown_option(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text("learning_rate = 0.1\n")
    with pytest.raises(ConfigError, match="learning_rate"):
        resolve({"game": "pong"}, str(preset))


@pytest.mark.parametrize("text, message", [
    (b"steps = true\n", "steps: expected int, got True"),
    (b'name = ["a"]\n', "name: expected str, got ['a']"),
    (b"lr = true\n", "lr: expected float, got True"),
    (b"steps = 10\n# caf\xe9\n", "is not valid TOML"),  # Latin-1, not UTF-8
])
def test_preset_values_have_the_options_types(tmp_path, text, message):
    preset = tmp_path / "p.toml"
    preset.write_bytes(text)
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        resolve({"game": "pong"}, str(preset))
    assert str(e.value).startswith(f"preset {str(preset)!r}")


@pytest.mark.parametrize("preset, agent_params", [
    ("bufferSize = 256\nbuffer_size = 128\n", None), (None, "bufferSize=256,buffer_size=128")])
def test_two_spellings_of_one_option_are_refused(tmp_path, preset, agent_params):
    path = tmp_path / "p.toml"
    path.write_text(preset or "")
    with pytest.raises(ConfigError, match="'bufferSize' and 'buffer_size' are one .*: give one of them"):
        resolve({"game": "pong"}, str(path), agent_params)

VALID = Config(game="pong", name="x")


@pytest.mark.parametrize("field, value, named", [
    ("game", None, "game"),
    ("steps", 0, "steps"), ("actrep", 0, "actrep"), ("eval_freq", 0, "eval_freq"),
    ("eval_steps", 0, "eval_steps"), ("save_freq", -1, "save_freq"), ("prog_freq", 0, "prog_freq"),
    ("pool_size", 0, "pool_size"), ("hist_len", 0, "hist_len"), ("update_freq", 0, "update_freq"),
    ("n_replay", 0, "n_replay"), ("minibatch_size", 0, "minibatch_size"), ("valid_size", 0, "valid_size"),
    ("ep_endt", 0, "ep_endt"), ("lr_endt", 0, "lr_endt"), ("threads", 0, "threads"),
    ("random_starts", -1, "random_starts"), ("learn_start", -1, "learn_start"),
    ("save_versions", -1, "save_versions"), ("target_q", -1, "target_q"), ("lr", -0.1, "lr"),
    ("wc", -1.0, "wc"), ("clip_delta", -1.0, "clip_delta"),
    ("ep", 1.5, "ep"), ("ep_end", -0.1, "ep_end"), ("discount", 1.01, "discount"),
    ("min_reward", 2.0, "min_reward"),
    ("minibatch_size", 512, "minibatch_size"), ("valid_size", 512, "valid_size"),
    ("learn_start", 100, "learn_start"), ("replay_memory", 100, "replay_memory"),
    ("pool_type", "median", "pool_type"), ("framework", "gym", "framework"), ("agent", "DQN", "agent"),
    ("preproc", "none", "preproc"), ("state_dim", 100, "state_dim"), ("ncols", 3, "ncols"),
    ("env_params", "useRGB=false", "env_params"),
    ("seed", 2**31, "seed"), ("checkpoint_freq", 0, "checkpoint_freq"), ("verbose", -1, "verbose"),
    ("gpu", -2, "gpu"), ("name", "run.ckpt", "run.ckpt"), ("steps", 2**63, "steps"),
])
def test_validate_rejects(field, value, named):
    validate(VALID)
    with pytest.raises(ConfigError, match=named) as err:
        validate(dataclasses.replace(VALID, **{field: value}))
    assert "\n" not in str(err.value)


def test_validate_accepts_the_bounds():
    validate(dataclasses.replace(VALID, seed=2**31 - 1, learn_start=VALID.buffer_size, min_reward=1.0,
                                 max_reward=1.0, gpu=-1, verbose=0, checkpoint_freq=1, steps=2**63 - 1))
    validate(dataclasses.replace(VALID, hist_len=600, learn_start=1000, replay_memory=602))
    with pytest.raises(ConfigError, match="a sample needs hist_len"):  # hist_len + 2 transitions
        validate(dataclasses.replace(VALID, hist_len=600, learn_start=1000, replay_memory=601))


@pytest.mark.parametrize("value, expected", [("1", True), ("0", False), ("TRUE", True), (0, False), (1, True)])
def test_a_boolean_option_from_text_or_a_number(value, expected):
    assert resolve({"game": "pong", "rescale_r": value}).rescale_r is expected
    if not isinstance(value, str):  # a Lua number: 0 switches rescaling off (see the README)
        assert resolve({"game": "pong"}, agent_params=f"rescale_r={value}").rescale_r is expected


def test_an_integer_option_from_text_in_exponent_form():
    assert resolve({"game": "pong", "learn_start": "6e4"}).learn_start == 60_000
    assert resolve({"game": "pong"}, agent_params="learn_start=6e4").learn_start == 60_000


def test_a_wheel_ships_the_presets_and_the_reference_data(tmp_path):
    # A non-editable install (pip install .) lost the presets: dqn-train --args run_gpu said "no
    # preset". The wheel is built from a copy of the checkout, which the build writes into.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    for name in ("dqn_nature", "args"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    tmp_path / "wheel", source], check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    presets = {f"dqn_nature/args/{preset}.toml" for preset in ("run_gpu", "run_cpu", "pong_fast")}
    reference = {f"dqn_nature/reference/{csv}" for csv in ("dopamine_dqn_curves.csv", "nature_dqn_scores.csv",
                                                            "atari57_random_human.csv")}
    assert presets | reference <= names, sorted(names)
    # Installed where Python finds it before the editable checkout, and used from another folder.
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", tmp_path / "site", wheel],
                   check=True, capture_output=True)
    code = ("import dqn_nature, dqn_nature.config as c; from importlib.resources import files; "
            "print(dqn_nature.__file__); print(c.load_preset(c.find_preset('run_gpu'))['eval_steps']); "
            "print(sorted(p.name for p in files('dqn_nature.reference').iterdir() if p.name.endswith('.csv')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    installed, eval_steps, csvs = result.stdout.splitlines()
    assert installed.startswith(str(tmp_path / "site")) and eval_steps == "125000"
    assert csvs == str(sorted(Path(name).name for name in reference))
