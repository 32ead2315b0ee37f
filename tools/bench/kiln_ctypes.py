"""kiln_ctypes.py — Kiln's attention entry points called from Python through libkiln.so.

The benchmarks time Kiln next to PyTorch on the same tensors: torch allocates Q, K, V, ...
on the GPU, and Kiln's C API (kiln_attention_fwd, kiln_attention_bwd) runs on their
data_ptr()s. Both use the device's primary CUDA context (kiln_init retains it, as the CUDA
runtime does), and a NULL KilnStream is the legacy default stream, which torch's default
stream also is, so Kiln's launches are ordered with torch's and torch.cuda.Event times them.

The parameter structs are not written out here: they are read from the public header
(include/kiln/kiln_attention.h) when the module loads, so a field added to the C API changes
the Python mirror with it. tests/tools/test_kiln_ctypes.py checks every offset against
the C compiler's offsetof.

  lib = kiln_ctypes.Kiln(path)                   # libkiln.so or libkiln_all.so
  p = lib.new("KilnAttentionBwdParams")          # zeroed; p.fwd.batch = 4, ...
  lib.check(lib.fn.kiln_attention_bwd_check(ctypes.byref(p)), "kiln_attention_bwd_check")
  var = kiln_ctypes.variant("lang/lib/variants/alibi.tile",     # a KilnAttentionVariant
                            args={"alibi_slopes": kiln_ctypes.Ptr(slopes.data_ptr(), 4 * heads)})
  p.fwd.variant = ctypes.addressof(var)                          # keep `var` alive meanwhile

Standard library only: importable without torch or a GPU.
"""
import ctypes
import glob
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = os.path.join(ROOT, "include", "kiln", "kiln_attention.h")
STRUCTS = ("KilnSchedule", "KilnBlockMask", "KilnAttentionParams", "KilnAttentionBwdParams",
           "KilnAttentionDecodeParams")
SCALARS = {
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "float": ctypes.c_float, "double": ctypes.c_double,
    "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "KilnDevPtr": ctypes.c_uint64,
    "KilnDtype": ctypes.c_int,   # a C enum: int-sized
}
KILN_F16, KILN_BF16 = 0, 1


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def parse_structs(header=HEADER, names=STRUCTS):
    """{name: [(field, ctype), ...]} for the typedef'd structs `names` of a C header (and of
    the headers it includes from its folder), in declaration order. Fields: scalar types of SCALARS, pointers (c_void_p), fixed arrays,
    and structs parsed before. Anything else raises ValueError naming the declaration."""
    text = open(header).read()
    # the headers it includes from its own folder too (KilnSchedule is kiln_compile.h's)
    for inc in re.findall(r'#\s*include\s+"([^"]+)"', text):
        path = os.path.join(os.path.dirname(header), inc)
        if os.path.isfile(path):
            text += "\n" + open(path).read()
    text = _strip_comments(text)
    out = {}
    for name in names:
        m = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*%s\s*;" % (name, name), text, re.S)
        if not m:
            raise ValueError(f"{header}: no 'typedef struct {name} {{ ... }} {name};'")
        fields = []
        for decl in m.group(1).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            dm = re.match(r"((?:const\s+)?(?:unsigned\s+)?[A-Za-z_]\w*)\s+(.*)$", decl)
            if not dm:
                raise ValueError(f"{name}: cannot read the declaration '{decl}'")
            base = dm.group(1).replace("const ", "")
            for d in dm.group(2).split(","):
                dd = re.match(r"\s*(\**)\s*([A-Za-z_]\w*)\s*((?:\[\s*\d+\s*\])*)\s*$", d)
                if not dd:
                    raise ValueError(f"{name}: cannot read the declarator '{d.strip()}' of '{decl}'")
                stars, field, dims = dd.groups()
                if stars:
                    ct = ctypes.c_void_p
                elif base in SCALARS:
                    ct = SCALARS[base]
                elif base in out:
                    ct = out[base]
                else:
                    raise ValueError(f"{name}.{field}: type '{base}' is unknown to kiln_ctypes.py (SCALARS)")
                for n in reversed([int(x) for x in re.findall(r"\d+", dims)]):
                    ct = ct * n
                fields.append((field, ct))
        out[name] = type(name, (ctypes.Structure,), {"_fields_": fields})
    return out


def find_library(explicit=None, root=ROOT):
    """libkiln: the explicit path, $KILN_LIB, else the newest build*/libkiln.so or
    build*/libkiln_all.so (KILN_SHARED builds: what tools/device_pack.sh carries, under
    lib/ of the bundle), else one on $LD_LIBRARY_PATH. None when there is none."""
    for p in (explicit, os.environ.get("KILN_LIB")):
        if p:
            return os.path.abspath(p) if os.path.isfile(p) else None
    found = glob.glob(os.path.join(root, "build*", "libkiln.so")) + \
        glob.glob(os.path.join(root, "build*", "libkiln_all.so"))
    for d in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":")):
        found += [os.path.join(d, n) for n in ("libkiln.so", "libkiln_all.so") if os.path.isfile(os.path.join(d, n))]
    return max(found, key=os.path.getmtime) if found else None


class KilnError(RuntimeError):
    pass


# ---- variants (KilnAttentionVariant): written out by hand, since KilnArg holds a union that
# parse_structs does not read; tests/tools/test_kiln_ctypes.py checks them against offsetof.
KILN_PARAM_PTR, KILN_PARAM_I32, KILN_PARAM_I64, KILN_PARAM_F32, KILN_PARAM_F64 = 0, 1, 2, 3, 4


class _ArgValue(ctypes.Union):
    _fields_ = [("ptr", ctypes.c_uint64), ("i", ctypes.c_int64), ("u", ctypes.c_uint64),
                ("f32", ctypes.c_float), ("f64", ctypes.c_double)]


class KilnArg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("v", _ArgValue)]


class KilnVariantArg(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", KilnArg), ("bytes", ctypes.c_size_t)]


class KilnDefine(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class KilnAttentionVariant(ctypes.Structure):
    _fields_ = [("source", ctypes.c_char_p), ("path", ctypes.c_char_p), ("defines", ctypes.POINTER(KilnDefine)),
                ("ndefines", ctypes.c_int), ("args", ctypes.POINTER(KilnVariantArg)), ("nargs", ctypes.c_int),
                ("include_dirs", ctypes.POINTER(ctypes.c_char_p)), ("ninclude_dirs", ctypes.c_int)]


class Ptr:
    """A pointer argument of a variant: an address (device, or host for the _cpu calls) and
    the buffer's size in bytes."""

    def __init__(self, addr, nbytes=0):
        self.addr, self.nbytes = int(addr), int(nbytes)


def variant(path=None, source=None, args=None, defines=None):
    """A KilnAttentionVariant: `path` (a file of the embedded library such as
    "lang/lib/variants/alibi.tile", or one on disk) and/or its `source` text; `args` a dict
    {param: value} with Ptr for pointer params, int (passed as i64) and float (f64) scalars;
    `defines` {name: value text}. The returned struct keeps what it points to alive; set
    KilnAttentionParams.variant = ctypes.addressof(it)."""
    args, defines = args or {}, defines or {}
    arr = (KilnVariantArg * max(len(args), 1))()
    for i, (name, val) in enumerate(args.items()):
        a = arr[i]
        a.name = name.encode()
        if isinstance(val, Ptr):
            a.value.kind, a.value.v.ptr, a.bytes = KILN_PARAM_PTR, val.addr, val.nbytes
        elif isinstance(val, bool) or not isinstance(val, (int, float)):
            raise TypeError(f"variant argument {name}: {type(val).__name__} (want Ptr, int or float)")
        elif isinstance(val, int):
            a.value.kind, a.value.v.i = KILN_PARAM_I64, val
        else:
            a.value.kind, a.value.v.f64 = KILN_PARAM_F64, val
    defs = (KilnDefine * max(len(defines), 1))(*[KilnDefine(k.encode(), str(v).encode())
                                                  for k, v in defines.items()])
    v = KilnAttentionVariant(source=source.encode() if source is not None else None,
                             path=path.encode() if path is not None else None,
                             defines=defs, ndefines=len(defines), args=arr, nargs=len(args))
    v._keep = (arr, defs)
    return v


class Kiln:
    """libkiln loaded with ctypes: .fn the typed functions, .types the parameter structs."""

    def __init__(self, path=None, header=HEADER):
        found = find_library(path)
        if not found:
            raise KilnError(f"no such library: {path}" if path else
                            "no libkiln.so / libkiln_all.so (build the kiln_shared target, or pass its path)")
        path = found
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.types = parse_structs(header)
        self.fn = _Functions(self.lib, self.types)
        self.dev = None

    def new(self, name, **fields):
        """A zeroed parameter struct of the header's type `name`, with `fields` set."""
        s = self.types[name]()
        for k, v in fields.items():
            setattr(s, k, v)
        return s

    def last_error(self):
        return (self.fn.kiln_last_error() or b"").decode(errors="replace")

    def check(self, status, what):
        """Raise KilnError unless status is KILN_OK (0)."""
        if status != 0:
            name = (self.fn.kiln_status_name(status) or b"?").decode()
            raise KilnError(f"{what}: {name}: {self.last_error()}")

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


class _Functions:
    """The C functions the benchmarks use, with their argument and result types."""

    def __init__(self, lib, types):
        P = ctypes.POINTER
        sig = {
            "kiln_version": (ctypes.c_char_p, []),
            "kiln_last_error": (ctypes.c_char_p, []),
            "kiln_status_name": (ctypes.c_char_p, [ctypes.c_int]),
            "kiln_init": (ctypes.c_int, [P(ctypes.c_void_p), ctypes.c_int]),
            "kiln_shutdown": (ctypes.c_int, [ctypes.c_void_p]),
            "kiln_synchronize": (ctypes.c_int, [ctypes.c_void_p]),
            "kiln_attention_cache_clear": (ctypes.c_int, [ctypes.c_void_p]),
            "kiln_attention_check": (ctypes.c_int, [P(types["KilnAttentionParams"])]),
            "kiln_attention_fwd": (ctypes.c_int, [ctypes.c_void_p, P(types["KilnAttentionParams"]), ctypes.c_void_p]),
            "kiln_attention_fwd_cpu": (ctypes.c_int, [P(types["KilnAttentionParams"])]),
            "kiln_attention_cache_size": (ctypes.c_int, [ctypes.c_void_p]),
            "kiln_attention_bwd_check": (ctypes.c_int, [P(types["KilnAttentionBwdParams"])]),
            "kiln_attention_bwd_scratch_size": (ctypes.c_size_t, [P(types["KilnAttentionBwdParams"])]),
            "kiln_attention_bwd": (ctypes.c_int, [ctypes.c_void_p, P(types["KilnAttentionBwdParams"]),
                                                  ctypes.c_void_p]),
            "kiln_attention_decode_check": (ctypes.c_int, [P(types["KilnAttentionDecodeParams"])]),
            # block masks: m = lib.new("KilnBlockMask", batch=1, heads=1) (block_q/block_kv 0: 128);
            # m.bytes = size(p, m); m.data = a buffer of that size; create(dev, p, m, None);
            # p.block_mask = ctypes.addressof(m) (keep m and its buffer alive meanwhile)
            "kiln_attention_block_mask_size": (ctypes.c_size_t, [P(types["KilnAttentionParams"]),
                                                                 P(types["KilnBlockMask"])]),
            "kiln_attention_block_mask_create": (ctypes.c_int, [ctypes.c_void_p, P(types["KilnAttentionParams"]),
                                                                P(types["KilnBlockMask"]), ctypes.c_void_p]),
            "kiln_attention_block_mask_create_cpu": (ctypes.c_int, [P(types["KilnAttentionParams"]),
                                                                    P(types["KilnBlockMask"])]),
        }
        for name, (res, args) in sig.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
            setattr(self, name, f)
