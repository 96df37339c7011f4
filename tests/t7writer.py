"""A minimal Torch7 serializer for tests: writes what ``torch.save`` would, binary or ascii.

Follows torch7's ``File.lua`` (``writeObject``): an int type tag (0 nil, 1 number, 2 string,
3 table, 4 torch object, 5 boolean); tables and torch objects carry an object index
(1, 2, ... in writing order; a repeated object is written as its index alone); a torch
object writes its version string (``"V 1"``) and class name, then either its C
serialisation (tensors: ndim, sizes, strides, storage offset + 1, storage; storages:
size, raw values) or the table of its fields (``nn`` modules). Binary: native int32,
int64 longs, float64 numbers; ascii (``THDiskFile``): numbers as text, each write
followed by a newline, characters raw.
"""
from __future__ import annotations

import struct

import numpy as np


class Tensor:
    """A tensor of Torch class ``typename`` (``torch.FloatTensor``, ``torch.CudaTensor``...);
    ``None``: an empty tensor (no dimensions, no storage). ``layout``: (sizes, strides,
    1-based storage offset) written instead of the array's, for damaged files."""

    def __init__(self, array, typename: str = "torch.FloatTensor", layout=None):
        dtype = np.float64 if "Double" in typename else np.float32
        self.array = None if array is None else np.ascontiguousarray(array, dtype)
        self.typename, self.layout = typename, layout


class Storage:
    """A storage (``torch.LongStorage`` for ``nn.Reshape``'s size...)."""

    def __init__(self, values, typename: str = "torch.LongStorage", dtype=np.int64):
        self.array, self.typename = np.asarray(values, dtype), typename


class Module:
    """A Torch class instance serialised as its fields, e.g. ``Module("nn.Linear", weight=...)``."""

    def __init__(self, typename: str, **fields):
        self.typename, self.fields = typename, fields


class Writer:
    def __init__(self, fh, ascii: bool = False):
        self.fh, self.ascii, self.index = fh, ascii, {}

    def _numbers(self, fmt: str, values) -> None:
        values = list(values)
        if self.ascii:
            text = {"i": "%d", "q": "%d", "d": "%.17g", "f": "%.9g"}[fmt]
            if values:
                self.fh.write((" ".join(text % v for v in values) + "\n").encode())
        else:
            self.fh.write(struct.pack(f"<{len(values)}{fmt}", *values))

    def _chars(self, text: str | bytes) -> None:
        raw = text.encode() if isinstance(text, str) else text
        self._numbers("i", [len(raw)])
        self.fh.write(raw)
        if self.ascii and raw:
            self.fh.write(b"\n")

    def write(self, obj) -> None:
        if obj is None:
            return self._numbers("i", [0])
        if isinstance(obj, bool):
            self._numbers("i", [5])
            return self._numbers("i", [int(obj)])
        if isinstance(obj, (int, float)):
            self._numbers("i", [1])
            return self._numbers("d", [float(obj)])
        if isinstance(obj, str):
            self._numbers("i", [2])
            return self._chars(obj)
        torch_object = isinstance(obj, (Tensor, Storage, Module))
        self._numbers("i", [4 if torch_object else 3])
        if id(obj) in self.index:
            return self._numbers("i", [self.index[id(obj)][0]])
        self.index[id(obj)] = (len(self.index) + 1, obj)  # holding obj keeps its id from being reused
        self._numbers("i", [len(self.index)])
        if not torch_object:
            items = list(enumerate(obj, 1)) if isinstance(obj, list) else list(obj.items())
            self._numbers("i", [len(items)])
            for key, value in items:
                self.write(key)
                self.write(value)
            return None
        self._chars("V 1")
        self._chars(obj.typename)
        if isinstance(obj, Module):
            return self.write(obj.fields)
        if isinstance(obj, Storage):
            a = obj.array
            self._numbers("q", [a.size])
            if self.ascii and a.dtype not in (np.uint8, np.int8):
                fmt = {np.dtype(np.float32): "f", np.dtype(np.float64): "d", np.dtype(np.int64): "q"}[a.dtype]
                return self._numbers(fmt, a.tolist())
            self.fh.write(a.astype(a.dtype.newbyteorder("<")).tobytes())  # bytes are raw in ascii too
            if self.ascii and a.size:
                self.fh.write(b"\n")
            return None
        a = obj.array
        if a is None:
            self._numbers("i", [0])
            self._numbers("q", [1])
            return self.write(None)
        size, stride, offset = obj.layout or (a.shape, [s // a.itemsize for s in a.strides], 1)
        self._numbers("i", [len(size)])
        self._numbers("q", size)
        self._numbers("q", stride)
        self._numbers("q", [offset])
        storage = obj.typename.replace("Tensor", "Storage")
        return self.write(Storage(a.reshape(-1), storage, a.dtype))


def save(path: str, obj, ascii: bool = False) -> None:
    """``torch.save(path, obj[, 'ascii'])`` for dicts, lists, numbers, strings, booleans,
    ``Tensor``, ``Storage`` and ``Module``."""
    with open(path, "wb") as fh:
        Writer(fh, ascii).write(obj)


# -- DQN 3.0 objects ------------------------------------------------------------------------------
def _layer(typename, **fields):
    return Module(typename, output=Tensor(None), gradInput=Tensor(None), train=True,
                  _type="torch.FloatTensor", **fields)


def dqn_network(weights: dict, conv: str = "nn.SpatialConvolution", weight_2d: bool = False,
                cuda: bool = False) -> Module:
    """The ``nn.Sequential`` of ``convnet_atari3`` (``convnet.lua``) holding ``weights``
    (numpy arrays under ConvNetAtari3's names, conv weights (out, in, kh, kw)).

    ``weight_2d``: conv weights stored (out, in*kh*kw) as ``SpatialConvolutionMM``;
    ``cuda``: DeepMind's GPU network (``nn.Transpose`` around ``SpatialConvolutionCUDA``
    layers with (in, kh, kw, out) weights, ``torch.CudaTensor`` parameters).
    """
    kind = "torch.CudaTensor" if cuda else "torch.FloatTensor"
    if cuda:
        conv = "nn.SpatialConvolutionCUDA"
    modules = [_layer("nn.Reshape", size=Storage([4, 84, 84]), nelement=4 * 84 * 84)]
    if cuda:
        modules.append(_layer("nn.Transpose", permutations=[[1, 2], [2, 3], [3, 4]]))
    for name, (k, s, p) in (("conv1", (8, 4, 1)), ("conv2", (4, 2, 0)), ("conv3", (3, 1, 0))):
        w = weights[f"{name}.weight"]
        out_planes, in_planes = w.shape[:2]
        stored = w.transpose(1, 2, 3, 0) if cuda else w.reshape(out_planes, -1) if weight_2d else w
        fields = dict(nInputPlane=in_planes, nOutputPlane=out_planes, kW=k, kH=k, dW=s, dH=s,
                      weight=Tensor(stored, kind), bias=Tensor(weights[f"{name}.bias"], kind))
        if cuda:
            fields["padding"] = p
        else:
            fields.update(padW=p, padH=p)
        modules += [_layer(conv, **fields), _layer("nn.Rectifier")]
    if cuda:
        modules.append(_layer("nn.Transpose", permutations=[[4, 3], [3, 2], [2, 1]]))
    modules.append(_layer("nn.Reshape", size=Storage([3136]), nelement=3136))
    for name in ("fc1", "fc2"):
        w = weights[f"{name}.weight"]
        modules.append(_layer("nn.Linear", weight=Tensor(w, kind), bias=Tensor(weights[f"{name}.bias"], kind)))
        if name == "fc1":
            modules.append(_layer("nn.Rectifier"))
    return _layer("nn.Sequential", modules=modules)
