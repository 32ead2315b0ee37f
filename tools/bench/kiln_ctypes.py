"""kiln_ctypes.py — Kiln's attention entry points called from Python through libkiln.so.

The benchmarks time Kiln next to PyTorch on the same tensors: torch allocates Q, K, V, ...
on the GPU, and Kiln's C API (kiln_attention_fwd, kiln_attention_bwd) runs on their
data_ptr()s. Both use the device's primary CUDA context (kiln_init retains it, as the CUDA
runtime does), and a NULL KilnStream is the legacy default stream, which torch's default
stream also is, so Kiln's launches are ordered with torch's and torch.cuda.Event times them.

The parameter structs are not written out here: they are read from the public header
(runtime/kiln_compile.h) when the module loads, so a field added to the C API changes
the Python mirror with it. tests/tools/test_kiln_ctypes.py checks every offset against
the C compiler's offsetof.

  lib = kiln_ctypes.Kiln(path)                   # libkiln.so or libkiln_all.so
  p = lib.new("KilnAttentionBwdParams")          # zeroed; p.fwd.batch = 4, ...
  lib.check(lib.fn.kiln_attention_bwd_check(ctypes.byref(p)), "kiln_attention_bwd_check")

Standard library only: importable without torch or a GPU.
"""
import ctypes
import glob
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = os.path.join(ROOT, "runtime", "kiln_compile.h")
STRUCTS = ("KilnBlockMask", "KilnAttentionParams", "KilnAttentionBwdParams", "KilnAttentionDecodeParams")
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
    """{name: [(field, ctype), ...]} for the typedef'd structs `names` of a C header, in
    declaration order. Fields: scalar types of SCALARS, pointers (c_void_p), fixed arrays,
    and structs parsed before. Anything else raises ValueError naming the declaration."""
    text = _strip_comments(open(header).read())
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
