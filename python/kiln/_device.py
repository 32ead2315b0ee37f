"""kiln._device — torch tensors and devices as the C API wants them.

One KilnDevice per CUDA ordinal (kiln_init retains the device's PRIMARY context, the one the
CUDA runtime, and so PyTorch, uses: pointers from torch's allocator are valid in it), opened on
first use and kept for the process. Launches go on torch's current stream of the tensors'
device, wrapped once per (device, stream) by kiln_stream_wrap, so Kiln's work is ordered with
torch's and captured with it into CUDA graphs.

Also: a tensor's byte span (what the CPU interpreter may touch), and the KilnArg of a Python
value for a parameter kind.
"""
import ctypes
import threading

from . import _capi

_lock = threading.Lock()
_devices = {}     # ordinal -> KilnDevice*
_streams = {}     # (ordinal, CUstream) -> KilnStream*
_sm_count = {}


def device(index):
    """The KilnDevice of CUDA ordinal `index` (opened once)."""
    dev = _devices.get(index)
    if dev is None:
        with _lock:
            dev = _devices.get(index)
            if dev is None:
                lib = _capi.lib()
                d = ctypes.c_void_p()
                lib.call("kiln_init", ctypes.byref(d), index)
                dev = _devices[index] = d
    return dev


def sm_count(index):
    n = _sm_count.get(index)
    if n is None:
        lib = _capi.lib()
        info = lib.new("KilnDeviceInfo")
        lib.call("kiln_device_info", device(index), ctypes.byref(info))
        n = _sm_count[index] = int(info.sm_count)
    return n


def current_stream(index):
    """(KilnDevice*, KilnStream*) for torch's current stream on CUDA device `index`."""
    import torch
    raw = torch.cuda.current_stream(index).cuda_stream
    key = (index, raw)
    s = _streams.get(key)
    if s is None:
        dev = device(index)
        with _lock:
            s = _streams.get(key)
            if s is None:
                w = ctypes.c_void_p()
                _capi.lib().call("kiln_stream_wrap", dev, ctypes.c_void_p(raw), ctypes.byref(w))
                s = _streams[key] = w
    return _devices[index], s


def span_bytes(t):
    """Bytes from t.data_ptr() to the end of its last element under its strides."""
    if t.numel() == 0:
        return 0
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
    return (last + 1) * t.element_size()


def kiln_arg(lib, kind, value, name):
    """The KilnArg of a Python scalar for a parameter of `kind` (KILN_PARAM_*)."""
    c = lib.consts
    a = lib.types["KilnArg"]()
    a.kind = kind
    if isinstance(value, bool):
        value = int(value)
    if kind in (c["KILN_PARAM_F32"], c["KILN_PARAM_F64"], c["KILN_PARAM_F16"], c["KILN_PARAM_BF16"]):
        if not isinstance(value, (int, float)):
            raise TypeError(f"argument '{name}': a float parameter wants a Python number, got {type(value).__name__}")
        if kind == c["KILN_PARAM_F32"]:
            a.v.f32 = float(value)
        elif kind == c["KILN_PARAM_F64"]:
            a.v.f64 = float(value)
        elif kind == c["KILN_PARAM_F16"]:   # 16-bit floats travel as their bits
            a.v.u = lib.kiln_f32_to_f16(float(value))
        else:
            a.v.u = lib.kiln_f32_to_bf16(float(value))
        return a
    if not isinstance(value, int):
        raise TypeError(f"argument '{name}': an integer parameter wants a Python int, got {type(value).__name__}")
    if kind in (c["KILN_PARAM_U8"], c["KILN_PARAM_U16"], c["KILN_PARAM_U32"], c["KILN_PARAM_U64"]):
        a.v.u = value
    else:
        a.v.i = value
    return a
