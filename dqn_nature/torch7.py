"""DQN 3.0's Torch7 files: ``<name>.t7`` snapshots and ``<name>.params.t7`` parameter vectors.

A snapshot is the table ``train_agent.lua`` saves: ``model`` and ``best_model`` (an
``nn.Sequential`` of ``nn.Reshape``, ``nn.SpatialConvolution`` (or its ``MM``/``CUDA``
variants, with ``nn.Transpose`` around the CUDA ones), ``nn.Rectifier`` and ``nn.Linear``),
the evaluation histories and ``arguments`` (the options, ``agent_params`` nested).
Binary files are read with the ``torchfile`` package (the ``legacy`` extra); the ascii
``.params.t7`` (``{network = w:float()}``) with a small reader of Torch7's ascii format.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re

import numpy as np
import torch

from .config import OPTION_BY_NAME, field_type
from .history import HISTORY_FIELDS, LUA_HISTORIES, HistoryError
from .convnet import convnet_atari3

# (kernel, stride, padding) of convnet_atari3's convolutions
CONV_SHAPES = {"conv1": (8, 4, 1), "conv2": (4, 2, 0), "conv3": (3, 1, 0)}
_CONVS = {"nn.SpatialConvolution", "nn.SpatialConvolutionMM", "nn.SpatialConvolutionCUDA",
          "cudnn.SpatialConvolution"}
_PASS_THROUGH = {"nn.Reshape", "nn.View", "nn.Transpose", "nn.Rectifier", "nn.ReLU", "cudnn.ReLU"}
MAX_WHOLE = 2**53  # Lua numbers (doubles) hold every whole number up to it
_DTYPES = {"Byte": np.uint8, "Char": np.int8, "Short": np.int16, "Int": np.int32, "Long": np.int64,
           "Float": np.float32, "Double": np.float64, "Cuda": np.float32}  # of torch.<kind>Tensor
_EXPECTED = {str: "a string", int: "a whole number up to 2^53", float: "a number",
             None: "a number, string, boolean or table"}


class LegacyError(HistoryError):
    """A Torch7 file that cannot be used; the message is one line naming the file."""


# -- reading ------------------------------------------------------------------------------
def read_t7(path: str):
    """The object stored in a Torch7 file, binary (by ``torchfile``) or ascii (``_AsciiReader``).

    Tables become dicts with ``str`` keys (lists when their keys are 1..n), strings
    ``str``, numbers int when whole and at most ``MAX_WHOLE`` in size (else float), tensors
    and storages numpy arrays (views of the storage), other Torch classes ``TorchObject``.

    Raises:
        LegacyError: missing or unreadable file, a pipe or device, or ``torchfile`` not installed
            for a binary one.
    """
    if os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path)):
        raise LegacyError(f"{path}: not a regular file (a pipe or a device)")  # a pipe's would wait for a writer
    try:
        with open(path, "rb") as fh:
            ascii_format = fh.read(2) in (b"3\n", b"4\n")  # a binary file starts with an int32 tag
    except OSError as e:
        raise LegacyError(f"{path}: cannot read ({e.strerror})") from None
    if not ascii_format:
        try:
            import torchfile
        except ImportError:
            raise LegacyError(f"{path}: reading Torch7 binary files needs torchfile: "
                              "pip install 'dqn-nature[legacy]'") from None
        # torchfile's own tensor readers take sizes, strides and offset unchecked (a view of memory
        # outside the storage where the file is damaged): replaced, for the process.
        for kind, dtype in _DTYPES.items():
            for name in (f"torch.{kind}Tensor".encode(), f"torch.Cuda{kind}Tensor".encode()):
                if name in torchfile.type_handlers:
                    torchfile.type_handlers[name] = functools.partial(_read_tensor, dtype=dtype)
    try:
        if ascii_format:
            with open(path, "rb") as fh:
                return _AsciiReader(fh.read()).read_obj()
        return _plain(torchfile.load(path))
    except Exception as e:  # torchfile raises struct.error, ValueError, EOFError... on damaged files
        raise LegacyError(f"{path}: not a readable Torch7 file ({type(e).__name__}: {e})") from None


def _read_tensor(reader, version, dtype) -> np.ndarray:
    """Torch7's ``Tensor.c`` read (ndim, sizes, strides, offset + 1, storage) by a ``torchfile``
    or ascii ``reader``, as ``_view`` checks it."""
    ndim = reader.read_int()
    size, stride = reader.read_long_array(ndim), reader.read_long_array(ndim)
    offset = reader.read_long() - 1
    return _view(reader.read_obj(), size, stride, offset, dtype)


def _view(storage, size: list, stride: list, offset: int, dtype) -> np.ndarray:
    """The tensor of ``size`` and ``stride`` (in values) from the 0-based ``offset`` of ``storage``
    as a view of it (empty where ``storage`` is None or ``size`` is []); ValueError for a storage
    that is not one, a negative number, or a non-empty tensor beyond its storage (a damaged file)."""
    if storage is None or not size:
        return np.empty(0, dtype)
    if not (isinstance(storage, np.ndarray) and storage.ndim == 1 and storage.flags.c_contiguous):
        raise ValueError(f"a tensor's storage is {describe(storage)}")
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if min(offset, *size, *stride) < 0 or (min(size) > 0 and last >= len(storage)):
        raise ValueError(f"a tensor of size {tuple(size)}, stride {tuple(stride)} and offset {offset + 1} "
                         f"does not lie within its storage of {len(storage)} values")
    return np.lib.stride_tricks.as_strided(storage[offset:], size, [s * storage.itemsize for s in stride])


def _plain(obj, memo=None):
    """torchfile's byte strings, hashable dicts and TorchObjects as ``str``, ``dict`` and
    ``TorchObject``; an object shared in the file stays shared."""
    memo = {} if memo is None else memo
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return _number(obj)
    if not isinstance(obj, (dict, list)) and not hasattr(obj, "torch_typename"):
        return obj
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, dict):
        out = memo[id(obj)] = {}
        out.update((_plain(k, memo), _plain(v, memo)) for k, v in obj.items())
    elif isinstance(obj, list):
        out = memo[id(obj)] = []
        out.extend(_plain(v, memo) for v in obj)
    else:
        out = memo[id(obj)] = TorchObject(_plain(obj.torch_typename()), {})
        out.fields = _plain(obj._obj, memo)
    return out


@dataclasses.dataclass
class TorchObject:
    """An instance of a Torch class other than tensors and storages (an ``nn`` module...)."""

    typename: str
    fields: dict

    def get(self, key, default=None):
        """``fields[key]``, or ``default`` where it is absent or ``fields`` is not a table."""
        return self.fields.get(key, default) if isinstance(self.fields, dict) else default


class _AsciiReader:
    """Torch7's ``File:readObject`` on an ascii file (``torch.save(f, x, 'ascii')``): numbers
    as text, a space after each but the last of a write and a newline after that; strings and
    bytes raw after their count, then a newline. Its ``read_*`` methods are ``torchfile.T7Reader``'s,
    for ``_read_tensor``."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.objects = data, 0, {}

    def _numbers(self, n: int, dtype=np.int64) -> np.ndarray:
        """The ``n`` numbers of one write: a line (none for n = 0)."""
        end = self.data.find(b"\n", self.pos) if n else self.pos
        if end < 0:
            raise ValueError(f"truncated file at byte {len(self.data)}")
        values = np.fromstring(self.data[self.pos:end], dtype, sep=" ")
        if values.size != n:
            raise ValueError(f"{values.size} numbers at byte {self.pos}, not {n}")
        self.pos = end + (n > 0)
        return values

    def read_long_array(self, n: int) -> list:
        return self._numbers(n).tolist()

    def read_int(self) -> int:
        return int(self._numbers(1)[0])

    read_long = read_int

    def _raw(self) -> bytes:
        """A string's or byte storage's bytes, after their count (a newline follows unless none)."""
        n = self.read_int()
        raw = self.data[self.pos:self.pos + n]
        if len(raw) < n:
            raise ValueError(f"truncated file at byte {len(self.data)}")
        self.pos += n + (n > 0)
        return raw

    def _chars(self) -> str:
        return self._raw().decode("utf-8", "replace")

    def read_obj(self):
        tag = self.read_int()
        if tag == 0:
            return None
        if tag == 1:
            return _number(self._numbers(1, np.float64)[0])
        if tag == 2:
            return self._chars()
        if tag == 5:
            return self.read_int() == 1
        if tag not in (3, 4):
            raise ValueError(f"object type {tag} at byte {self.pos} (functions are not read)")
        index = self.read_int()
        if index in self.objects:
            return self.objects[index]
        if tag == 3:
            table = self.objects[index] = {}
            for _ in range(self.read_int()):
                key = self.read_obj()  # the key is stored first
                table[key] = self.read_obj()
            if set(table) == set(range(1, len(table) + 1)):
                self.objects[index] = [table[k] for k in range(1, len(table) + 1)]
            return self.objects[index]
        version = self._chars()
        typename = self._chars() if version.startswith("V ") else version
        kind = re.fullmatch(r"torch\.(Cuda)?(\w*?)(Tensor|Storage)", typename)
        if not kind:
            obj = self.objects[index] = TorchObject(typename, {})
            obj.fields = self.read_obj()
            return obj
        dtype = _DTYPES[kind.group(2) or kind.group(1)]
        if kind.group(3) == "Tensor":
            values = _read_tensor(self, None, dtype)
        elif dtype in (np.uint8, np.int8):  # bytes are written raw, as a string's
            values = np.frombuffer(self._raw(), dtype).copy()
        else:
            values = self._numbers(self.read_int(), np.float64).astype(dtype)
        self.objects[index] = values
        return values


def _number(x):
    """A Lua number as int where it is whole and at most ``MAX_WHOLE`` in size, else as float."""
    x = float(x)
    return int(x) if x.is_integer() and abs(x) <= MAX_WHOLE else x


def describe(obj) -> str:
    """A short description of a Torch7 object for error messages."""
    if obj is None:
        return "nothing"
    if isinstance(obj, TorchObject):
        return f"a {obj.typename}"
    if isinstance(obj, np.ndarray):
        return f"a tensor of shape {tuple(obj.shape)}"
    if isinstance(obj, dict):
        keys = sorted(map(str, obj))
        if not keys:
            return "an empty table"
        return f"a table with keys {', '.join(keys[:8])}{', ...' if len(keys) > 8 else ''}"
    if isinstance(obj, list):
        return f"a list of {len(obj)} values"
    name = type(obj).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name} {obj!r:.40}"


# -- networks --------------------------------------------------------------------------------
def network_state(model, where: str) -> dict:
    """The ``convnet_atari3`` ``state_dict`` of a DQN 3.0 ``nn.Sequential``.

    ``model`` as ``read_t7`` returns it, ``where`` its name for messages. Convolution weights are
    accepted 4-D (out, in, kh, kw), 2-D (out, in*kh*kw) (``SpatialConvolutionMM``) and, for
    ``SpatialConvolutionCUDA``, (in, kh, kw, out). Returns float32 tensors under ``ConvNetAtari3``'s
    names, checked to load into it.

    Raises:
        LegacyError: no list of layers, other layers, other kernel/stride/padding, or shapes
            that do not fit.
    """
    if not isinstance(model, TorchObject) or model.typename != "nn.Sequential":
        raise LegacyError(f"{where} is {describe(model)}, not the nn.Sequential of convnet_atari3")
    modules = model.get("modules")
    if not isinstance(modules, list):
        raise LegacyError(f"{where}: its modules are {describe(modules)}, not a list of layers")
    convs, linears = [], []
    for module in modules:
        name = getattr(module, "typename", type(module).__name__)
        if name in _CONVS:
            convs.append(module)
        elif name == "nn.Linear":
            linears.append(module)
        elif name not in _PASS_THROUGH:
            raise LegacyError(f"{where} has a {name} layer; convnet_atari3 has only Reshape, "
                              "SpatialConvolution, Rectifier and Linear layers")
    if len(convs) != 3 or len(linears) != 2:
        raise LegacyError(f"{where} has {len(convs)} convolutions and {len(linears)} linear layers; "
                          "convnet_atari3 has 3 and 2")
    state = {}
    for (key, (k, s, p)), conv in zip(CONV_SHAPES.items(), convs):
        pad = (conv.get("padW"), conv.get("padH")) if conv.get("padW") is not None else (conv.get("padding", 0),) * 2
        found = (conv.get("kW"), conv.get("kH"), conv.get("dW", 1), conv.get("dH", 1), *pad)
        if found != (k, k, s, s, p, p):
            raise LegacyError(f"{where}: convolution {key} has kernel {found[:2]}, stride {found[2:4]}, "
                              f"padding {found[4:]}; convnet_atari3 needs {k}, {s}, {p}")
        weight = _tensor(conv, "weight", where)
        if conv.typename.endswith("CUDA") and weight.ndim == 4:
            weight = weight.transpose(3, 0, 1, 2)
        elif weight.ndim == 2 and weight.shape[1] % (k * k) == 0:
            weight = weight.reshape(len(weight), -1, k, k)
        state[f"{key}.weight"], state[f"{key}.bias"] = weight, _tensor(conv, "bias", where)
    for key, linear in zip(("fc1", "fc2"), linears):
        state[f"{key}.weight"], state[f"{key}.bias"] = _tensor(linear, "weight", where), _tensor(linear, "bias", where)
    return _checked({k: torch.tensor(np.asarray(v, np.float32)) for k, v in state.items()}, where)


def _tensor(module: TorchObject, field: str, where: str) -> np.ndarray:
    value = module.get(field)
    if not isinstance(value, np.ndarray):
        raise LegacyError(f"{where}: its {module.typename} has {describe(value)} as {field}, not a tensor")
    return value


def _checked(state: dict, where: str) -> dict:
    """``state`` after loading it into a ``convnet_atari3`` of its action count and history length."""
    empty = next((key for key, value in state.items() if not value.numel()), None)
    if empty:  # convnet_atari3 would be built with no actions or no input frames
        raise LegacyError(f"{where} does not fit convnet_atari3 (its {empty} is empty)")
    try:
        net = convnet_atari3(state["fc2.weight"].shape[0], state["conv1.weight"].shape[1])
        net.load_state_dict(state)
    except (RuntimeError, IndexError) as e:
        detail = str(e).strip().splitlines()[-1].strip()
        raise LegacyError(f"{where} does not fit convnet_atari3 ({detail})") from None
    return net.state_dict()


def params_state(vector, where: str, n_actions: int | None = None, hist_len: int = 4,
                 cuda_conv: bool = False) -> dict:
    """The ``convnet_atari3`` ``state_dict`` (float32 tensors) of a flat parameter vector
    (``saveNetworkParams``): a float array (P,) holding each layer's weight then bias, input first,
    in Torch7's memory order (``getParameters``); ``cuda_conv``: convolution weights in
    ``SpatialConvolutionCUDA``'s (in, kh, kw, out) order (DeepMind's GPU network). ``n_actions``:
    the expected action count, None to infer it from P.

    Raises:
        LegacyError: P does not fit convnet_atari3 with ``hist_len`` (and ``n_actions``).
    """
    flat = np.asarray(vector, np.float32).reshape(-1)
    shapes = {k: tuple(v.shape) for k, v in convnet_atari3(1, hist_len).state_dict().items()}
    fixed = sum(int(np.prod(s)) for k, s in shapes.items() if not k.startswith("fc2"))
    per_action = shapes["fc2.weight"][1] + 1
    inferred, rest = divmod(flat.size - fixed, per_action)
    if rest or inferred < 1 or (n_actions is not None and inferred != n_actions):
        want = f"{fixed + per_action * n_actions}" if n_actions else f"{fixed} + {per_action} per action"
        raise LegacyError(f"{where} has {flat.size} parameters; convnet_atari3 with hist_len {hist_len}"
                          f"{f' and {n_actions} actions' if n_actions else ''} has {want}")
    shapes["fc2.weight"], shapes["fc2.bias"] = (inferred, per_action - 1), (inferred,)
    state = {}
    values = np.split(flat, np.cumsum([int(np.prod(shape)) for shape in shapes.values()])[:-1])
    for (key, shape), value in zip(shapes.items(), values):
        if cuda_conv and key.startswith("conv") and key.endswith("weight"):
            value = value.reshape(shape[1], shape[2], shape[3], shape[0]).transpose(3, 0, 1, 2)
        state[key] = torch.tensor(value.reshape(shape))
    return _checked(state, where)


# -- snapshots --------------------------------------------------------------------------------
@dataclasses.dataclass
class Snapshot:
    """A DQN 3.0 training snapshot in this package's terms.

    ``model``/``best_model``: ``state_dict`` (best_model None before the first evaluation);
    ``history``: the ``history.HISTORY_FIELDS`` lists, ``step_history`` reconstructed;
    ``arguments``: the options under ``config`` names where they map (others kept);
    ``game``: ROM id (the Lua ``env``); ``steps``: training steps done.
    """

    model: dict
    best_model: dict | None
    history: dict
    arguments: dict
    game: str | None
    steps: int


def load_snapshot(path: str, data=None) -> Snapshot:
    """Read ``<name>.t7`` as ``train_agent.lua`` saved it (``data``: its ``read_t7`` content when read).

    Raises:
        LegacyError: unreadable, not a snapshot, histories that are not lists of numbers or not one
            entry per evaluation (``time_history`` one more), arguments of the wrong type, or a
            network that is not convnet_atari3.
    """
    data = read_t7(path) if data is None else data
    if not isinstance(data, dict) or not isinstance(data.get("model"), TorchObject):
        raise LegacyError(f"{path}: not a DQN 3.0 snapshot (a table with model, best_model, "
                          f"reward_history, arguments...); found {describe(data)}")
    lua_args = _lua_arguments(data)
    arguments = convert_arguments(lua_args, path)
    history = {key: _series(data.get(key), path, key) for key in LUA_HISTORIES}
    n = len(history["reward_history"])  # train_agent.lua appends to each at every evaluation
    uneven = [f"{key} has {len(history[key])}" for key in LUA_HISTORIES
              if len(history[key]) != n + (key == "time_history")]
    if uneven:
        raise LegacyError(f"{path}: uneven histories: {', '.join(uneven)} entries for reward_history's {n} "
                          "evaluations (train_agent.lua adds one to each per evaluation, time_history starting with 0)")
    agent_params = lua_args.get("agent_params") if isinstance(lua_args.get("agent_params"), dict) else {}
    eval_freq = whole_number(lua_args.get("eval_freq"), 10_000, path, "eval_freq")  # train_agent.lua's default
    learn_start = whole_number(agent_params.get("learn_start"), 0, path, "learn_start")  # NeuralQLearner's
    first = (learn_start // eval_freq + 1) * eval_freq
    history["step_history"] = [first + i * eval_freq for i in range(n)]
    last = whole_number(history["step_history"][-1] if n else 0, 0, path,
                        "the last evaluation's step (from eval_freq and learn_start)")
    agent = data.get("agent")
    steps = whole_number(agent.get("numSteps") if isinstance(agent, TorchObject) else None, last, path,
                         "agent.numSteps")
    best = data.get("best_model")
    return Snapshot(model=network_state(data["model"], f"{path}: model"),
                    best_model=network_state(best, f"{path}: best_model") if best is not None else None,
                    history=history, arguments=arguments, game=arguments.get("game"), steps=steps)


def whole_number(value, default: int, path: str, what: str) -> int:
    """A Lua number that counts steps or frames as an int; ``default`` where it is nil, false or 0.

    Raises:
        LegacyError: not a whole number from 1 to ``MAX_WHOLE`` (the message names ``path`` and ``what``).
    """
    if value is None or value is False or type(value) is int and value == 0:
        return default
    if type(value) is int and 0 < value <= MAX_WHOLE:
        return value
    raise LegacyError(f"{path}: {what} is {describe(value)}, not a whole number from 1 to 2^53")


def _series(value, path: str, key: str) -> list:
    """A Lua array of numbers as a list, holes (indices missing from a table, at most as many as it
    holds) as NaN. LegacyError where it is not one, or for ``reward_counts`` and ``episode_counts``
    not of whole numbers from 0."""
    if value is None:
        return []
    if isinstance(value, dict) and all(type(k) is int and k > 0 for k in value):
        last = max(value, default=0)
        if last > 2 * len(value):  # mostly holes: a list up to its last index could fill the memory
            raise LegacyError(f"{path}: {key} is a table with indices up to {last} and {len(value)} of them "
                              "set, not a list of numbers")
        value = [value.get(i) for i in range(1, last + 1)]
    elif isinstance(value, np.ndarray):
        value = [_number(v) for v in value.reshape(-1).tolist()]
    if not isinstance(value, list):
        raise LegacyError(f"{path}: {key} is {describe(value)}, not a list of numbers")
    counts = HISTORY_FIELDS[key] is np.int64
    for i, v in enumerate(value, 1):
        if not (type(v) is int and v >= 0 if counts else v is None or type(v) in (int, float)):
            raise LegacyError(f"{path}: {key}[{i}] is {describe(v)}, not "
                              f"{'a whole number from 0' if counts else 'a number'}")
    return [float("nan") if v is None else v for v in value]


def convert_arguments(lua_args: dict, path: str) -> dict:
    """The Lua ``arguments`` table of the file ``path`` under ``config`` names.

    ``agent_params`` is flattened into it (the top-level options win, as they are what the Lua
    used); ``env`` becomes ``game``, ``pool_frms`` ``pool_type``/``pool_size``, ``gpu`` the 0-based
    device (the Lua stores cutorch's 1-based one), ``''`` None; values take their option's type, a
    Lua number for a boolean option meaning true (Lua's truthiness). Options without a counterpart
    keep their Lua names, nested tables as Lua table bodies.

    Raises:
        LegacyError: a key that is not a name, or a value of the wrong type.
    """
    agent = lua_args.get("agent_params")
    merged = {**(agent if isinstance(agent, dict) else {}),
              **{k: v for k, v in lua_args.items() if k != "agent_params"}}
    if merged.get("network") == "convnet_atari3":  # the architecture, not a pretrained file
        del merged["network"]
    if isinstance(merged.get("pool_frms"), dict):
        pool = merged.pop("pool_frms")
        merged.update(pool_type=pool.get("type"), pool_size=pool.get("size"))
    out = {}
    for key, value in merged.items():
        if not isinstance(key, str):
            raise LegacyError(f"{path}: arguments has {describe(key)} as a key, not an option name")
        if isinstance(value, (dict, list)):
            value = _lua_table(value)
        if isinstance(value, str) and not value:
            value = None
        f = OPTION_BY_NAME.get(key)
        value = _typed(f, value, path, key)
        if key == "gpu" and value is not None:
            value = value - 1 if value >= 1 else -1
        out[f.name if f else key] = value
    return out


def _typed(f, value, path: str, key: str):
    """``value`` of the option ``f`` (None: one without a counterpart) as its type, LegacyError for
    another type (for ``f`` None, a Torch object); a boolean is Lua's truthiness."""
    kind = field_type(f) if f else None
    if kind is bool:
        return value is not None and value is not False
    number = type(value) in (int, float)
    fits = {str: isinstance(value, str), int: type(value) is int, float: number,
            None: number or isinstance(value, (str, bool))}[kind]
    if value is not None and not fits:
        raise LegacyError(f"{path}: {key} is {describe(value)}, not {_EXPECTED[kind]}")
    return float(value) if kind is float and value is not None else value


def _lua_table(value) -> str:
    """A table as a Lua table body (``type="max",size=2``), lists as ``{1,2}``."""
    def lua(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, (dict, list)):
            return "{" + _lua_table(v) + "}"
        return repr(v)
    if isinstance(value, list):
        return ",".join(lua(v) for v in value)
    return ",".join(f"{k}={lua(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))


def _lua_arguments(snapshot: dict) -> dict:
    """A snapshot's ``arguments`` table (the Lua options), or {} where it has none."""
    return snapshot.get("arguments") if isinstance(snapshot.get("arguments"), dict) else {}


def param_vector(data) -> np.ndarray | None:
    """The flat vector of a ``.params.t7`` (``{network = w}``, or the bare 1-D tensor), else None."""
    vector = data.get("network") if isinstance(data, dict) else data
    return vector if isinstance(vector, np.ndarray) and vector.ndim == 1 else None


def load_t7_network(path: str, best: bool = False) -> tuple[dict, dict]:
    """The network of a ``.t7`` snapshot (``best_model`` with ``best``), or of a ``.params.t7``
    vector (action count inferred from its length), as a ``state_dict``, and the snapshot's
    options under ``config`` names (``convert_arguments``; {} for a vector).

    Raises:
        LegacyError: unreadable file, neither kind, no best_model, not convnet_atari3, or arguments
            of the wrong type.
    """
    data = read_t7(path)
    vector = param_vector(data)
    if vector is not None:
        if best:
            raise LegacyError(f"{path}: a parameter vector holds one network, not a best one")
        return params_state(vector, path), {}
    if not isinstance(data, dict) or "model" not in data:
        raise LegacyError(f"{path}: not a DQN 3.0 snapshot or parameter vector; found {describe(data)}")
    which = "best_model" if best else "model"
    if data.get(which) is None:
        raise LegacyError(f"{path}: no {which} stored (best_model exists after an evaluation)")
    return network_state(data[which], f"{path}: {which}"), convert_arguments(_lua_arguments(data), path)
