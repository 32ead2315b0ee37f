"""kiln_ctypes.py — the benchmarks' handle on libkiln.so: the kiln package's ctypes layer
(python/kiln/_capi.py), under the names the benchmarks and tests/tools/test_kiln_ctypes.py use.
One way to call Kiln from Python: the structs are read from the public headers by the package
(nested structs and all), nothing is written out here.

The benchmarks time Kiln next to PyTorch on the same tensors: torch allocates Q, K, V, ...
on the GPU, and Kiln's C API (kiln_attention_fwd, kiln_attention_bwd) runs on their
data_ptr()s. Both use the device's primary CUDA context (kiln_init retains it, as the CUDA
runtime does), and a NULL KilnStream is the legacy default stream, which torch's default
stream also is, so Kiln's launches are ordered with torch's and torch.cuda.Event times them.

  lib = kiln_ctypes.Kiln(path)                   # libkiln.so or libkiln_all.so
  p = lib.new("KilnAttentionBwdParams")          # zeroed; p.fwd.batch = 4, ...
  lib.check(lib.fn.kiln_attention_bwd_check(ctypes.byref(p)), "kiln_attention_bwd_check")
  var = kiln_ctypes.variant("lang/lib/variants/alibi.tile",     # a KilnAttentionVariant
                            args={"alibi_slopes": kiln_ctypes.Ptr(slopes.data_ptr(), 4 * heads)})
  p.fwd.variant = ctypes.addressof(var)                          # keep `var` alive meanwhile

Standard library only: importable without torch or a GPU.
"""
import ctypes
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))   # the checkout's package, before an installed one
from kiln import _capi  # noqa: E402
from kiln._capi import KilnError, Ptr, find_library  # noqa: E402,F401

HEADER = os.path.join(ROOT, "include", "kiln", "kiln_attention.h")
STRUCTS = ("KilnSchedule", "KilnBlockMask", "KilnAttentionParams", "KilnAttentionBwdParams",
           "KilnAttentionDecodeParams")


def _header(header=HEADER):
    return _capi.Header([os.path.join(os.path.dirname(header), h) for h in _capi.HEADERS])


def parse_structs(header=HEADER, names=STRUCTS):
    """{name: ctypes struct} for the structs `names` of the public headers (header: the path of
    kiln_attention.h; its siblings kiln_runtime.h and kiln_compile.h are read too)."""
    types = _header(header).types
    return {n: types[n] for n in names}


_H = _header()
KilnArg, KilnVariantArg, KilnDefine, KilnAttentionVariant = (
    _H.types[n] for n in ("KilnArg", "KilnVariantArg", "KilnDefine", "KilnAttentionVariant"))
KILN_F16, KILN_BF16 = _H.consts["KILN_F16"], _H.consts["KILN_BF16"]
KILN_PARAM_PTR, KILN_PARAM_I32, KILN_PARAM_I64, KILN_PARAM_F32, KILN_PARAM_F64 = (
    _H.consts["KILN_PARAM_" + t] for t in ("PTR", "I32", "I64", "F32", "F64"))


def variant(path=None, source=None, args=None, defines=None):
    """A KilnAttentionVariant (kiln._capi.build_variant): set KilnAttentionParams.variant =
    ctypes.addressof(it) and keep it alive meanwhile."""
    return _capi.build_variant(_H.types, _H.consts, path, source, args, defines)


class Kiln:
    """libkiln loaded with ctypes: .fn the typed functions, .types the parameter structs."""

    def __init__(self, path=None, header=HEADER):
        try:
            self.lib = _capi.Lib(path, include_dir=os.path.dirname(header))
        except _capi.KilnError as e:
            raise KilnError(str(e)) from None
        self.path, self.fn, self.types = self.lib.path, self.lib, self.lib.types
        self.dev = None

    def new(self, name, **fields):
        """A zeroed parameter struct of the header's type `name`, with `fields` set."""
        return self.lib.new(name, **fields)

    def last_error(self):
        return self.lib.last_error()

    def check(self, status, what):
        """Raise KilnError unless status is KILN_OK (0)."""
        if status != 0:
            raise KilnError(f"{what}: {self.lib.status_name(status)}: {self.last_error()}")

    def init(self, ordinal=0):
        """Open the device (kiln_init; the primary context torch uses too)."""
        dev = ctypes.c_void_p()
        self.check(self.fn.kiln_init(ctypes.byref(dev), ordinal), "kiln_init")
        self.dev = dev
        return dev

    def shutdown(self):
        if self.dev:
            self.fn.kiln_attention_cache_clear(self.dev)
            self.fn.kiln_shutdown(self.dev)
            self.dev = None

    def attention_fwd(self, p):
        self.check(self.fn.kiln_attention_fwd(self.dev, ctypes.byref(p), None), "kiln_attention_fwd")

    def attention_bwd(self, p):
        self.check(self.fn.kiln_attention_bwd(self.dev, ctypes.byref(p), None), "kiln_attention_bwd")
