"""Run configuration: the one declaration of every option (a field of ``Config``, with its default
from DQN 3.0's ``run_gpu`` script, its Lua name and help), from which the command line (both
spellings), the TOML presets, the agent's defaults and the ``arguments`` stored in a history all
come; and the parser for Lua table literals (``agent_params``, ``pool_frms``).
"""
import contextlib
import dataclasses
import importlib.resources
import math
import os
import re
import tomllib
import typing
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path


class ConfigError(ValueError):
    """An invalid option value; the message is one line for the user."""


def option(default, help, lua=None, agent=False, flag=False, choices=None, aliases=(), resume=False):
    """Declare one option. ``lua``: its ``train_agent.lua`` or ``agent_params`` name when it differs;
    ``agent``: a NeuralQLearner parameter; ``flag``: takes no value on the command line; ``aliases``:
    further command-line spellings; ``resume``: may change on resume (output, logging, resources)."""
    return field(default=default, metadata=dict(help=help, lua=lua, agent=agent, flag=flag,
                                                choices=choices, aliases=aliases, resume=resume))


@dataclass
class Config:
    """Every option of a training run (``train_agent.lua``'s ``cmd:option``s and NeuralQLearner's
    ``agent_params``). Steps are agent steps (frames = steps x actrep)."""

    # -- train_agent.lua options -------------------------------------------------------
    game: str | None = option(None, "ale-py ROM id of the game (pong, breakout, ...)", lua="env",
                              aliases=("--env",))
    game_path: str | None = option(None, "folder of <game>.bin ROMs that takes precedence over ale-py's",
                                   resume=True)
    framework: str = option("alewrap", "environment framework (only alewrap)", choices=("alewrap",))
    env_params: str = option("useRGB=true", "environment parameters, a Lua table body (only useRGB=true)")
    agent: str = option("NeuralQLearner", "agent class (only NeuralQLearner)", choices=("NeuralQLearner",))
    name: str | None = option(None, "output base name, may include a folder [DQN3_0_1_<game>_FULL_Y]",
                              resume=True)
    network: str | None = option(None, "pretrained network to start from (.h5 history, .params.h5, "
                                 "DQN 3.0 .t7)")
    best: bool = option(False, "with --network, start from its best network", flag=True)
    steps: int = option(50_000_000, "agent steps to train", resume=True)
    eval_freq: int = option(250_000, "evaluate every this many steps")
    eval_steps: int = option(125_000, "steps per evaluation")
    prog_freq: int = option(10_000, "report progress every this many steps", resume=True)
    save_freq: int = option(125_000, "write the history file every this many steps", resume=True)
    save_versions: int = option(0, "if > 0, name files <name>_<floor(step/save_versions)>", resume=True)
    save_network_params: bool = option(False, "also write the flat parameter vector to <name>.params.h5",
                                       lua="saveNetworkParams", flag=True, resume=True)
    actrep: int = option(4, "frames per agent step (action repeat)")
    random_starts: int = option(30, "1..random_starts no-op frames after each new game")
    pool_type: str = option("max", "pooling over the last frames (max or mean)", choices=("max", "mean"))
    pool_size: int = option(2, "frames pooled into one screen")
    seed: int = option(1, "random seed (a CPU run is repeatable for a given seed)")
    threads: int = option(4, "torch CPU threads (at most the machine's cores are used)", resume=True)
    gpu: int = option(0, "CUDA device; -1 or no CUDA: the CPU", resume=True)
    verbose: int = option(2, "0 quiet, 1 arguments and evaluations, 2 also layer norms", resume=True)
    precision: str = option("fp32", "fp32 (as DQN 3.0); bf16 autocast or, on CUDA, tf32 (neither bit-faithful; "
                            "bf16 is emulated, 5x slower, on CPUs with neither AMX nor AVX-512 BF16)",
                            choices=("fp32", "bf16", "tf32"))
    checkpoint_freq: int | None = option(None, "write <name>.ckpt every this many steps [save_freq]",
                                         resume=True)
    checkpoint_replay: bool = option(False, "include the replay memory in checkpoints (exact resume)",
                                     flag=True, resume=True)
    checkpoint_compress: bool = option(False, "gzip the replay memory in checkpoints", flag=True, resume=True)
    csv_log: str | None = option(None, "append one CSV row per evaluation to this file", resume=True)
    tensorboard: str | None = option(None, "write each evaluation as TensorBoard scalars to this folder "
                                     "(the tensorboard extra)", resume=True)
    # -- NeuralQLearner parameters (agent_params) --------------------------------------
    lr: float = option(0.00025, "learning rate", agent=True)
    lr_end: float | None = option(None, "final learning rate [lr]", agent=True)
    lr_endt: int = option(1_000_000, "steps after learn_start over which lr anneals", agent=True)
    wc: float = option(0.0, "weight cost (L2)", agent=True)
    ep: float = option(1.0, "initial exploration rate epsilon", agent=True)
    ep_end: float = option(0.1, "final epsilon", agent=True)
    ep_endt: int = option(1_000_000, "steps after learn_start over which epsilon anneals", agent=True)
    discount: float = option(0.99, "discount factor gamma", agent=True)
    hist_len: int = option(4, "frames per agent state", agent=True)
    learn_start: int = option(50_000, "steps before learning starts", agent=True)
    replay_memory: int = option(1_000_000, "replay memory size in transitions", agent=True)
    update_freq: int = option(4, "steps between minibatch updates", agent=True)
    n_replay: int = option(1, "minibatch updates each time", agent=True)
    preproc: str = option("net_downsample_2x_full_y", "preprocessing (only DQN 3.0's)", agent=True,
                          choices=("net_downsample_2x_full_y",))
    state_dim: int = option(7056, "values per preprocessed frame (only 7056)", agent=True, choices=(7056,))
    ncols: int = option(1, "colour channels per frame (only 1)", agent=True, choices=(1,))
    minibatch_size: int = option(32, "transitions per minibatch", agent=True)
    rescale_r: bool = option(True, "divide rewards by the largest seen", agent=True)
    buffer_size: int = option(512, "prefetched samples of the replay memory", lua="bufferSize", agent=True)
    valid_size: int = option(500, "validation transitions", agent=True)
    target_q: int = option(10_000, "steps between target network copies (0: no target network)", agent=True)
    clip_delta: float = option(1.0, "TD error clipping (0: none)", agent=True)
    min_reward: float = option(-1.0, "rewards are clipped below at this", agent=True)
    max_reward: float = option(1.0, "rewards are clipped above at this", agent=True)

    def agent_params(self) -> dict:
        """The NeuralQLearner parameters under their Lua names."""
        return {lua_name(f): getattr(self, f.name) for f in FIELDS if f.metadata["agent"]}

    def as_dict(self) -> dict:
        """Every option by its Python name, as stored in a history's ``arguments``."""
        return dataclasses.asdict(self)


FIELDS = dataclasses.fields(Config)
FIELD_BY_NAME = {f.name: f for f in FIELDS}


def lua_name(f) -> str:
    """The Lua spelling of a field (``bufferSize`` for ``buffer_size``)."""
    return f.metadata["lua"] or f.name


def field_type(f) -> type:
    """The value type of a field: int, float, str or bool."""
    args = [t for t in typing.get_args(f.type) if t is not type(None)]
    return args[0] if args else f.type


FLOAT32_MAX = 3.4028234663852886e38  # the largest finite float32: the network's and optimiser's numbers
SEED_LIMIT = 2**31  # seeds are below it: the emulator's seed is a C int
TESTING_EP = 0.05  # the exploration rate of train_agent.lua's evaluations
# Every option under its Python and its Lua name.
OPTION_BY_NAME = {**{f.name: f for f in FIELDS}, **{lua_name(f): f for f in FIELDS}}


def default_name(game: str) -> str:
    """``DQN3_0_1_<game>_FULL_Y``, the output base name of the run_gpu script."""
    return f"DQN3_0_1_{game}_FULL_Y"


# -- Lua table literals ------------------------------------------------------------------
_TOKEN = re.compile(r"""\s*(?:(?P<key>[A-Za-z_]\w*)\s*=\s*(?P<value>"[^"]*"|'[^']*'|[^,;]+?))\s*(?:[,;]|$)""")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|0[xX][0-9a-fA-F]+)")


class BareWord(str):
    """An unquoted word in a Lua table: a global variable, nil to Lua. A string option takes
    it as text (the shell strips the quotes of ``type="max"``). For another option, a word
    that names an option is nil, as in Lua, and leaves it at its default (run_gpu's
    ``ep_endt=replay_memory``); any other word is refused as a likely typo (``lr=fast``)."""


def parse_lua_table(text: str) -> dict:
    """Parse a Lua table body such as ``lr=0.00025,ep=1,network="convnet_atari3",rescale_r=true``:
    fields separated by ``,`` or ``;`` (as in Lua), values numbers (int when integral in form),
    quoted strings, ``true``/``false``, or a ``BareWord``; braces around the body are allowed.
    Ports ``initenv.lua``'s ``str_to_table``, which ran the body as Lua.

    Raises:
        ConfigError: naming the part that is not ``key=value``, an unterminated string or
            another value.
    """
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1].strip()
    result, pos = {}, 0
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if not m or m.end() == pos:
            bad = re.split("[,;]", body[pos:])[0].strip() or body[pos:]
            raise ConfigError(f"malformed Lua table {text!r}: cannot read {bad!r} (expected key=value)")
        key, raw = m.group("key"), m.group("value").strip()
        if raw[:1] in "\"'":
            if len(raw) < 2 or raw[-1] != raw[0]:
                raise ConfigError(f"malformed Lua table {text!r}: unterminated string {raw!r} for {key!r}")
            value = raw[1:-1]
        elif raw in ("true", "false"):
            value = raw == "true"
        elif _NUMBER.fullmatch(raw):
            hexadecimal = re.fullmatch(r"[+-]?0[xX][0-9a-fA-F]+", raw)
            # Lua reads 0100 as 100, where Python's int(raw, 0) refuses a leading zero.
            value = int(raw, 16 if hexadecimal else 10) if hexadecimal or raw.lstrip("+-").isdigit() else float(raw)
        elif re.fullmatch(r"[A-Za-z_]\w*", raw):
            value = BareWord(raw)
        else:
            raise ConfigError(f"malformed Lua table {text!r}: bad value {raw!r} for {key!r}")
        result[key] = value
        pos = m.end()
    return result


def _coerce(f, value):
    """Convert ``value`` to the type of field ``f``; raises ConfigError."""
    if value is None:
        return None
    kind = field_type(f)
    try:
        if isinstance(value, bool) and kind is not bool or kind is str and not isinstance(value, str):
            raise TypeError  # TOML's steps = true, name = ["a"]
        if kind is bool:
            if isinstance(value, str):
                if value.lower() not in ("1", "0", "true", "false"):
                    raise ValueError
                return value.lower() in ("1", "true")
            return bool(value)
        if kind is int:
            if isinstance(value, str):  # "60000" or "6e4", not "60000.9"
                try:
                    return int(value)
                except ValueError:
                    value = float(value)
            if isinstance(value, float) and not value.is_integer():  # inf and nan too
                raise ValueError
            return int(value)
        return kind(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: float() of a 400-digit integer
        raise ConfigError(f"{f.name}: expected {kind.__name__}, got {value!r}") from None


def typed(values: dict) -> dict:
    """``values`` (a stored run's arguments) with each option's value converted to its type, other
    names kept. Raises ConfigError: a value of another type. No Lua counterpart."""
    return {k: _coerce(FIELD_BY_NAME[k], v) if k in FIELD_BY_NAME else v for k, v in values.items()}


def _named(values: dict, source: str) -> dict:
    """``values`` by Python name, typed; refuses unknown names and two spellings of one option."""
    out, spelling = {}, {}
    for key, value in values.items():
        f = OPTION_BY_NAME.get(key)
        if f is None:
            raise ConfigError(f"unknown {source} {key!r}")
        if spelling.setdefault(f.name, key) != key:
            raise ConfigError(f"{spelling[f.name]!r} and {key!r} are one {source}: give one of them")
        if isinstance(value, BareWord) and field_type(f) is not str and value in OPTION_BY_NAME:
            continue  # nil in Lua: the option keeps its default (see BareWord)
        out[f.name] = _coerce(f, value)
    return out


def agent_params_from_lua(text: str) -> dict:
    """Options from an ``agent_params`` string. ``network`` is the architecture when it
    names ``convnet_atari3`` and a pretrained network file otherwise, as in the Lua
    (``str_to_table`` of ``-agent_params``).

    Raises:
        ConfigError: a malformed table, an unknown key, two spellings of one key or a value of
            the wrong type.
    """
    values = parse_lua_table(text)
    arch = values.pop("network", "convnet_atari3")
    if unknown := [k for k in values if k not in OPTION_BY_NAME or not OPTION_BY_NAME[k].metadata["agent"]]:
        raise ConfigError(f"unknown agent parameter {unknown[0]!r} in agent_params")
    out = _named(values, "agent parameter")
    if arch != "convnet_atari3":
        out["network"] = arch
    return out


def pool_frms_from_lua(text: str) -> dict:
    """``pool_type``/``pool_size`` from a ``pool_frms`` string like ``type="max",size=2``
    (``str_to_table`` of ``-pool_frms``).

    Raises:
        ConfigError: a malformed table, an unknown key or a value of the wrong type.
    """
    values = parse_lua_table(text)
    if unknown := set(values) - {"type", "size"}:
        raise ConfigError(f"unknown pool_frms key {sorted(unknown)[0]!r} (expected type, size)")
    return _named({("pool_" + k): v for k, v in values.items()}, "pool_frms key")


def find_preset(name: str) -> Traversable:
    """Preset ``name``: a TOML file, or ``<name>[.toml]`` in the folder ``args/`` where the
    command runs or among the presets the package ships (``dqn_nature.args``: run_gpu,
    run_cpu, pong_fast). No Lua counterpart: presets stand in for the ``run_gpu`` scripts.

    Raises:
        ConfigError: no such preset.
    """
    if os.path.isfile(name):
        return Path(name)
    shipped = importlib.resources.files("dqn_nature.args")
    for folder in (Path("args"), shipped):
        for candidate in (folder / name, folder / f"{name}.toml"):
            if candidate.is_file():
                return candidate
    names = sorted(p.name.removesuffix(".toml") for p in shipped.iterdir() if p.name.endswith(".toml"))
    raise ConfigError(f"no preset {name!r} (a TOML file, or a name in args/ or among the package's presets: "
                      f"{', '.join(names)})")


def load_preset(path: str | Traversable) -> dict:
    """Options from the TOML preset ``path`` (a file's path, or a preset ``find_preset`` found;
    keys: Python or Lua option names). No Lua counterpart.

    Raises:
        ConfigError: an unreadable file, invalid TOML, an unknown key or a value of the wrong type.
    """
    source = Path(path) if isinstance(path, str) else path
    try:
        with source.open("rb") as fh:
            return _named(tomllib.load(fh), "option")
    except OSError as e:
        raise ConfigError(f"cannot read preset {str(path)!r}: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"preset {str(path)!r} is not valid TOML: {e}") from None
    except ConfigError as e:
        raise ConfigError(f"preset {str(path)!r}: {e}") from None


def layered(explicit: dict | None = None, preset: str | Traversable | None = None, agent_params: str | None = None,
            pool_frms: str | None = None) -> dict:
    """The options set, by Python name, from: a TOML ``preset`` (a path, or what ``find_preset``
    found) < the Lua table bodies ``agent_params`` and ``pool_frms`` < ``explicit`` options (Python
    or Lua names). Raises ConfigError. No Lua counterpart."""
    values = load_preset(preset) if preset else {}
    if agent_params:
        values.update(agent_params_from_lua(agent_params))
    if pool_frms:
        values.update(pool_frms_from_lua(pool_frms))
    values.update(_named(explicit or {}, "option"))
    return values


def build(values: dict) -> Config:
    """A validated ``Config`` from option values over the defaults; names the output
    ``DQN3_0_1_<game>_FULL_Y`` when no name is given. Raises ConfigError."""
    config = Config(**_named(values, "option"))
    if config.game and not config.name:
        config.name = default_name(config.game)
    validate(config)
    return config


def resolve(explicit: dict | None = None, preset: str | None = None, agent_params: str | None = None,
            pool_frms: str | None = None) -> Config:
    """A run's validated options: ``layered``'s over the defaults. Raises ConfigError."""
    return build(layered(explicit, preset, agent_params, pool_frms))


def resume_config(stored: dict, changes: dict) -> Config:
    """The options of a resumed run: ``stored`` (a checkpoint's arguments) with ``changes``
    (from ``layered``) applied. No Lua counterpart (DQN 3.0 could not resume).

    Raises:
        ConfigError: a change to an option that is not declared ``resume=True``, or a value
            that ``validate`` refuses.
    """
    stored = {k: v for k, v in stored.items() if k in FIELD_BY_NAME}
    for key, value in changes.items():
        if not FIELD_BY_NAME[key].metadata["resume"] and value != stored.get(key):
            allowed = ", ".join(f.name for f in FIELDS if f.metadata["resume"])
            raise ConfigError(f"{key} cannot change when resuming (the run has {stored.get(key)!r}); "
                              f"options that may: {allowed}")
    return build({**stored, **changes})


# Options that runs of earlier versions may have stored, and what a resumed run does instead.
REMOVED_OPTIONS = {
    "overlap_updates": "overlap_updates is no longer an option: this run continues with the plain update, "
                       "the same arithmetic (bit for bit with --threads 1)",
}


def validate(c: Config) -> None:
    """Reject impossible values with one line naming the option. Raises ConfigError. No Lua counterpart."""
    if not c.game:
        raise ConfigError("no game given: use --game (or -env), e.g. --game pong")
    env = parse_lua_table(c.env_params)
    if env.get("useRGB", True) is not True or set(env) - {"useRGB"}:
        raise ConfigError(f"env_params {c.env_params!r} not supported: only useRGB=true")
    positive = ("steps", "actrep", "eval_freq", "eval_steps", "save_freq", "prog_freq", "pool_size",
                "hist_len", "replay_memory", "update_freq", "n_replay", "minibatch_size", "buffer_size",
                "valid_size", "lr_endt", "ep_endt", "threads", "checkpoint_freq")
    for name in positive:
        if getattr(c, name) is not None and getattr(c, name) <= 0:
            raise ConfigError(f"{name} must be positive, not {getattr(c, name)}")
    for f in FIELDS:
        value = getattr(c, f.name)
        if f.metadata["choices"] and value not in f.metadata["choices"]:
            raise ConfigError(f"{f.name} must be one of {', '.join(map(str, f.metadata['choices']))}, not {value!r}")
        # A name from the command line that is not UTF-8 holds surrogates, which h5py cannot store.
        if isinstance(value, str) and re.search(r"[\ud800-\udfff]", value):
            raise ConfigError(f"--{f.name.replace('_', '-')} {value!r} is not valid UTF-8, which the history "
                              "stores its arguments in; give a UTF-8 name")
        if field_type(f) is float and value is not None:
            if not math.isfinite(value):
                raise ConfigError(f"{f.name} must be a finite number, not {value}")
            if abs(value) > FLOAT32_MAX:  # the agent computes in float32: the first update failed
                raise ConfigError(f"{f.name} is out of range (|value| <= {FLOAT32_MAX:.7g}, float32's largest): "
                                  f"{value}")
        if field_type(f) is int and value is not None and abs(value) >= 2**63:
            raise ConfigError(f"{f.name} is out of range (|value| < 2^63, the history's integers): {value}")
    if not 0 <= c.seed < SEED_LIMIT:
        raise ConfigError(f"seed must be in [0, 2^31), not {c.seed} (the emulator's seed is a C int)")
    if c.gpu < -1:
        raise ConfigError(f"gpu must be -1 (the CPU) or a CUDA device number, not {c.gpu}")
    if c.verbose < 0:
        raise ConfigError(f"verbose must not be negative, not {c.verbose}")
    if c.name and (c.name.endswith((os.sep, ".h5", ".ckpt")) or os.path.basename(c.name) in ("", ".", "..")):
        raise ConfigError(f"--name {c.name!r}: give a base name, to which .h5 and .ckpt are added (e.g. runs/pong)")
    for name in ("random_starts", "learn_start", "save_versions", "target_q", "lr", "lr_end", "wc", "clip_delta"):
        if getattr(c, name) is not None and getattr(c, name) < 0:
            raise ConfigError(f"{name} must not be negative, not {getattr(c, name)}")
    for name in ("ep", "ep_end", "discount"):
        if not 0 <= getattr(c, name) <= 1:
            raise ConfigError(f"{name} must be in [0, 1], not {getattr(c, name)}")
    if c.min_reward > c.max_reward:
        raise ConfigError(f"min_reward {c.min_reward} is above max_reward {c.max_reward}")
    for name in ("minibatch_size", "valid_size"):
        if getattr(c, name) >= c.buffer_size:
            raise ConfigError(f"{name} ({getattr(c, name)}) must be smaller than bufferSize ({c.buffer_size})")
    if c.learn_start < c.buffer_size:
        raise ConfigError(f"learn_start ({c.learn_start}) must be at least bufferSize ({c.buffer_size}): "
                          "the first samples need that many transitions")
    if c.replay_memory < c.buffer_size:
        raise ConfigError(f"replay_memory ({c.replay_memory}) must be at least bufferSize ({c.buffer_size})")
    if c.hist_len >= c.learn_start or c.hist_len + 2 > c.replay_memory:
        raise ConfigError(f"hist_len ({c.hist_len}) must be below learn_start ({c.learn_start}) and replay_memory - 1 "
                          f"({c.replay_memory - 1}): a sample needs hist_len + 2 transitions")


def replay_bytes(c: Config) -> int:
    """Bytes the replay memory takes when full (frame, action, reward and flag per transition)
    with its minibatch buffers (``bufferSize`` stacked states s and s2)."""
    return c.replay_memory * (c.state_dim + 1 + 4 + 1) + 2 * c.buffer_size * c.hist_len * c.state_dim


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (MemAvailable), None where unknown."""
    with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
