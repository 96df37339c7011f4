"""C kernels of the port (``kernels.c``), compiled for this machine at first use. No Lua counterpart.

Loops that torch or NumPy run as several passes: the RMSProp update in float32
(``DeepMindRMSProp.step``, with torch's bits) and in ``--precision bf16``
(``DeepMindRMSProp.step_from_bfloat16``), the conversion of stored frames into the
network's channels-last input (``NeuralQLearner._to_input``, float32 and bf16 alike, with
torch's values bit for bit), and a screen's preprocessing (``preprocess.preprocess``, with
NumPy's bytes). ``$CC`` (default ``cc``) compiles the file with OpenMP in about
0.3 s; it is loaded through ctypes, and its loops run on torch's OpenMP threads.
"""
from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch

SOURCE = Path(__file__).with_name("kernels.c")
VML_MODE = 0x140102  # VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE: torch's mode for its MKL calls


def library() -> ctypes.CDLL:
    """The compiled ``kernels.c``, its functions' argument types set. No Lua counterpart.

    Raises:
        RuntimeError: it cannot be built or used here, with the reason (no compiler, the
            compiler failed, the library does not load, or a second OpenMP runtime beside
            torch's, whose threads would contend with torch's); again at every call.
    """
    built, error = _build()
    if error:
        raise RuntimeError(error)
    return built


@functools.cache
def _build() -> tuple[ctypes.CDLL | None, str | None]:
    """(library, None) or (None, why not)."""
    compiler = os.environ.get("CC", "cc")
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "kernels.so")
            # 512-bit vectors where the CPU has them: 1 to 5% more steps/s on an AVX-512 Xeon
            built = subprocess.run([compiler, "-O3", "-march=native", "-mprefer-vector-width=512", "-fno-math-errno",
                                    "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC", str(SOURCE), "-o", path],
                                   capture_output=True, text=True)
            if built.returncode:
                return None, f"{compiler} failed: {(built.stderr.strip().splitlines() or ['?'])[-1]}"
            lib = ctypes.CDLL(path)  # mapped: the file may go
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError as e:
        return None, str(e)
    runtimes = sorted(p for p in paths if os.path.basename(p).startswith(("libgomp", "libiomp", "libomp")))
    if len(runtimes) != 1:
        return None, f"OpenMP runtimes loaded: {runtimes or 'none seen'}"
    lib.rmsprop.restype = lib.rmsprop_from_bf16.restype = lib.frames_to_nhwc4.restype = None
    lib.rmsprop.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 4 + [ctypes.c_float] * 5 + [ctypes.c_void_p,
                                                                                              ctypes.c_int64]
    lib.rmsprop_from_bf16.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 6 + [ctypes.c_float] * 5
    lib.frames_to_nhwc4.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                    ctypes.c_int]
    lib.screen_to_bytes.restype = None
    lib.screen_to_bytes.argtypes = ([ctypes.c_int64] * 2 + [ctypes.c_void_p] + [ctypes.c_float] * 3
                                    + ([ctypes.c_int64] + [ctypes.c_void_p] * 3) * 2 + [ctypes.c_int64]
                                    + [ctypes.c_void_p] * 2)
    return lib, None


def frames_to_input(frames: np.ndarray, dtype: torch.dtype) -> torch.Tensor | None:
    """States as the network's input on the CPU, in one pass (the kernel path of
    ``NeuralQLearner._to_input``). No Lua counterpart.

    Args:
        frames: uint8 (N, 4, 7056) stored frames, which become k / 255 (float32 division), or
            float32 ones in [0, 1], taken as they are.
        dtype: torch.float32, or torch.bfloat16 (rounded to nearest even).

    Returns:
        dtype (N, 4, 84, 84) in channels-last layout, or None where the kernel is unavailable
        or the states are not four 84x84 frames of those types.
    """
    n = len(frames)
    if frames.dtype not in (np.uint8, np.float32) or frames.size != n * 4 * 84 * 84:
        return None
    try:
        lib = library()
    except RuntimeError:
        return None
    frames = np.ascontiguousarray(frames)
    out = torch.empty(n, 84, 84, 4, dtype=dtype)
    lib.frames_to_nhwc4(n, 84 * 84, frames.ctypes.data, int(frames.dtype == np.uint8), out.data_ptr(),
                        int(dtype == torch.bfloat16))
    return out.permute(0, 3, 1, 2)


@functools.cache
def mkl_sqrt() -> int | None:
    """The address of MKL's ``vmsSqrt`` in torch's ``libtorch_cpu``, which ``torch.sqrt``
    calls (with ``VML_MODE``) on float32 CPU tensors, or None where torch has no MKL. No Lua
    counterpart."""
    if not torch.backends.mkl.is_available():
        return None
    try:
        torch_cpu = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        return ctypes.cast(torch_cpu.vmsSqrt, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
