"""kiln._capi — libkiln.so through ctypes, its structs read from the public headers.

Nothing of the C API's layout is written out here: the structs (typedef struct NAME {...} NAME),
enums and integer #defines of include/kiln/{kiln_runtime,kiln_compile,kiln_attention,kiln_tune}.h are
parsed when the module loads, in header order, so a field added to (or moved within, or nested
into a struct of) the C API changes the Python mirror with it. Fields are set by NAME, dotted
through nested structs ("fwd.batch", "schedule.pingpong"), never by offset.
tests/tools/test_kiln_ctypes.py checks every offset against the C compiler's offsetof.

Where things are found (first hit wins):
  library: $KILN_LIBRARY (a path to libkiln.so); the wheel's kiln/lib/libkiln.so; in a source
           checkout, the newest <repo>/build*/libkiln.so (or libkiln_all.so).
  headers: $KILN_INCLUDE_DIR; the wheel's kiln/include/kiln; <repo>/include/kiln.

Standard library only: importable without torch or a GPU.

  lib = kiln._capi.lib()                      # loaded once
  p = lib.new("KilnAttentionBwdParams", **{"fwd.batch": 4, "deterministic": 1})
  lib.call("kiln_attention_bwd_check", ctypes.byref(p))   # raises on an error status
"""
import ctypes
import glob
import os
import re
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.abspath(os.path.join(_HERE, "..", ".."))
HEADERS = ("kiln_runtime.h", "kiln_compile.h", "kiln_attention.h", "kiln_tune.h")

SCALARS = {
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint, "float": ctypes.c_float,
    "double": ctypes.c_double, "char": ctypes.c_char, "long long": ctypes.c_longlong,
    "unsigned long long": ctypes.c_ulonglong, "long": ctypes.c_long, "unsigned long": ctypes.c_ulong,
    "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8, "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16,
    "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "bool": ctypes.c_bool, "_Bool": ctypes.c_bool,
}


class KilnError(RuntimeError):
    """A Kiln call failed; the message is kiln_last_error()'s, after the call's name."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class CompileError(KilnError):
    """A program (a kernel, a variant) does not compile; the message is the compiler's located
    diagnostics (file:line:col: error: ..., the source line and a caret)."""


# ---------------- the headers ----------------

def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def find_include_dir():
    for d in (os.environ.get("KILN_INCLUDE_DIR"), os.path.join(_HERE, "include", "kiln"),
              os.path.join(_REPO, "include", "kiln")):
        if d and os.path.isfile(os.path.join(d, "kiln_attention.h")):
            return d
    raise KilnError("no Kiln headers (kiln_attention.h): set KILN_INCLUDE_DIR, or reinstall the package")


class Header:
    """What the C headers declare: .types {name: ctypes type} (structs, unions, scalars and
    enums as their ctypes), .consts {NAME: int} (enum constants and integer #defines)."""

    def __init__(self, paths):
        self.types = dict(SCALARS)
        self.consts = {}
        self.structs = []          # struct names, in declaration order
        self._anon = 0
        text = "\n".join(open(p, encoding="utf-8").read() for p in paths)
        text = _strip_comments(text)
        for m in re.finditer(r"^\s*#\s*define\s+([A-Z_][A-Z0-9_]*)\s+\(?(-?\d+)\)?\s*$", text, re.M):
            self.consts[m.group(1)] = int(m.group(2))
        # typedefs in order: scalar aliases, enums and structs (bodies may hold nested unions)
        pat = re.compile(r"typedef\s+(?:(struct|enum|union)\s+(\w+)\s*\{|([\w\s]+?)\s+(\w+)\s*;)")
        pos = 0
        while True:
            m = pat.search(text, pos)
            if not m:
                break
            if m.group(1):
                kind, name = m.group(1), m.group(2)
                body, end = self._block(text, m.end() - 1)
                tail = re.match(r"\s*(\w+)\s*;", text[end:])
                if not tail:
                    raise ValueError(f"typedef {kind} {name}: no name after its body")
                pos = end + tail.end()
                if kind == "enum":
                    self._enum(name, body)
                else:
                    self.types[name] = self._struct(name, body, union=(kind == "union"))
                    self.structs.append(name)
            else:
                base, name = " ".join(m.group(3).split()), m.group(4)
                pos = m.end()
                if base in self.types:
                    self.types[name] = self.types[base]

    @staticmethod
    def _block(text, open_brace):
        """The text between the brace at open_brace and its match, and the index after it."""
        depth = 0
        for i in range(open_brace, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[open_brace + 1:i], i + 1
        raise ValueError("unbalanced braces in a Kiln header")

    def _enum(self, name, body):
        value = -1
        for item in filter(None, (x.strip() for x in body.split(","))):
            m = re.match(r"(\w+)\s*(?:=\s*(.+))?$", item)
            value = self._int(m.group(2)) if m.group(2) else value + 1
            self.consts[m.group(1)] = value
        self.types[name] = ctypes.c_int   # a C enum is int-sized

    def _int(self, expr):
        expr = expr.strip()
        return self.consts[expr] if expr in self.consts else int(expr, 0)

    def _struct(self, name, body, union=False):
        # nested anonymous struct/union members become types of their own first
        while True:
            m = re.search(r"\b(struct|union)\s*\{", body)
            if not m:
                break
            inner, end = self._block(body, m.end() - 1)
            self._anon += 1
            anon = f"_{name}_anon{self._anon}"
            self.types[anon] = self._struct(anon, inner, union=(m.group(1) == "union"))
            body = body[:m.start()] + anon + " " + body[end:]
        fields = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            dm = re.match(r"((?:const\s+)?(?:struct\s+)?(?:unsigned\s+|signed\s+)?(?:long\s+long|long|\w+))\s*(.*)$",
                          decl)
            if not dm:
                raise ValueError(f"{name}: cannot read the declaration '{decl}'")
            base = dm.group(1).replace("const ", "").replace("struct ", "").strip()
            for d in dm.group(2).split(","):
                dd = re.match(r"\s*((?:\*\s*(?:const\s*)?)*)\s*([A-Za-z_]\w*)\s*((?:\[\s*\w+\s*\])*)\s*$", d)
                if not dd:
                    raise ValueError(f"{name}: cannot read the declarator '{d.strip()}' of '{decl}'")
                stars, field, dims = dd.group(1).count("*"), dd.group(2), dd.group(3)
                if stars == 1 and base == "char":
                    ct = ctypes.c_char_p
                # other pointers are addresses (ctypes.addressof(x), a tensor's data_ptr()): the
                # caller keeps what they point to alive
                elif stars:
                    ct = ctypes.c_void_p
                elif base in self.types:
                    ct = self.types[base]
                else:
                    raise ValueError(f"{name}.{field}: type '{base}' is not declared before it")
                for n in reversed([self._int(x) for x in re.findall(r"\[\s*(\w+)\s*\]", dims)]):
                    ct = ct * n
                fields.append((field, ct))
        return type(name, (ctypes.Union if union else ctypes.Structure,), {"_fields_": fields})


def set_fields(obj, fields):
    """Set dotted field names ("fwd.batch") of a ctypes struct; lists/tuples fill arrays."""
    for path, value in fields.items():
        *outer, last = path.split(".")
        target = obj
        for part in outer:
            target = getattr(target, part)
        if not hasattr(type(target), last):
            raise AttributeError(f"{type(obj).__name__} has no field '{path}'")
        if isinstance(value, (list, tuple)):
            getattr(target, last)[:] = value
        else:
            setattr(target, last, value)
    return obj


# ---------------- the library ----------------

def find_library(explicit=None):
    """libkiln: the explicit path, $KILN_LIBRARY ($KILN_LIB, the benchmarks' older name), the
    wheel's kiln/lib/libkiln.so, else the newest <repo>/build*/libkiln.so or libkiln_all.so
    (KILN_SHARED builds), else one on $LD_LIBRARY_PATH. None when there is none."""
    for p in (explicit, os.environ.get("KILN_LIBRARY"), os.environ.get("KILN_LIB")):
        if p:
            return os.path.abspath(p) if os.path.isfile(p) else None
    wheel = os.path.join(_HERE, "lib", "libkiln.so")
    if os.path.isfile(wheel):
        return wheel
    found = glob.glob(os.path.join(_REPO, "build*", "libkiln.so")) + \
        glob.glob(os.path.join(_REPO, "build*", "libkiln_all.so"))
    for d in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":")):
        found += [os.path.join(d, n) for n in ("libkiln.so", "libkiln_all.so") if os.path.isfile(os.path.join(d, n))]
    return max(found, key=os.path.getmtime) if found else None


# Status -> the Python exception a caller expects (kiln_runtime.h's KilnStatus, by name).
_EXC = {"KILN_ERR_COMPILE": CompileError, "KILN_ERR_USAGE": ValueError, "KILN_ERR_ARGS": TypeError,
        "KILN_ERR_UNSUPPORTED": NotImplementedError, "KILN_ERR_NOT_FOUND": FileNotFoundError}


class Lib:
    """libkiln.so loaded: .types and .consts from the headers, the C functions as attributes
    (kiln_*, argument and result types set), new() for zeroed structs, call() raising."""

    def __init__(self, path=None, include_dir=None):
        found = find_library(path)
        if not found:
            raise KilnError(f"no such library: {path}" if path else
                            "no libkiln.so: set KILN_LIBRARY, build the kiln_shared target, or pip install kiln")
        self.path = found
        self.cdll = ctypes.CDLL(found)
        self.include_dir = include_dir or find_include_dir()
        self.header = Header([os.path.join(self.include_dir, h) for h in HEADERS])
        self.types, self.consts = self.header.types, self.header.consts
        self._status_names = {v: k for k, v in self.consts.items() if k == "KILN_OK" or k.startswith("KILN_ERR_")}
        self._declare()

    def _declare(self):
        T, P, c = self.types, ctypes.POINTER, ctypes
        vp, i, sz, cp = c.c_void_p, c.c_int, c.c_size_t, c.c_char_p
        sig = {
            "kiln_version": (cp, []), "kiln_last_error": (cp, []), "kiln_status_name": (cp, [i]),
            "kiln_device_count": (i, [P(i)]), "kiln_init": (i, [P(vp), i]), "kiln_shutdown": (i, [vp]),
            "kiln_device_info": (i, [vp, P(T["KilnDeviceInfo"])]), "kiln_synchronize": (i, [vp]),
            "kiln_stream_wrap": (i, [vp, vp, P(vp)]), "kiln_stream_destroy": (i, [vp]),
            "kiln_compile": (i, [cp, cp, P(T["KilnCompileOptions"]), P(T["KilnCompileResult"])]),
            "kiln_compile_result_free": (None, [P(T["KilnCompileResult"])]),
            "kiln_run_cpu": (i, [cp, cp, P(T["KilnCompileOptions"]), P(c.c_int * 3), P(T["KilnHostArg"]), i]),
            "kiln_module_compile": (i, [vp, cp, cp, P(T["KilnCompileOptions"]), P(vp)]),
            "kiln_module_free": (i, [vp]), "kiln_kernel_get": (i, [vp, cp, P(vp)]),
            "kiln_kernel_info": (P(T["KilnKernelInfo"]), [vp]),
            "kiln_launch": (i, [vp, P(c.c_int * 3), vp, P(T["KilnArg"]), i]),
            "kiln_f32_to_f16": (c.c_uint16, [c.c_float]), "kiln_f32_to_bf16": (c.c_uint16, [c.c_float]),
            "kiln_lib_source": (cp, [cp]), "kiln_data_path": (i, [cp, cp, sz]),
            "kiln_attention_check": (i, [P(T["KilnAttentionParams"])]),
            "kiln_attention_fwd": (i, [vp, P(T["KilnAttentionParams"]), vp]),
            "kiln_attention_fwd_cpu": (i, [P(T["KilnAttentionParams"])]),
            "kiln_attention_cache_clear": (i, [vp]), "kiln_attention_cache_size": (i, [vp]),
            "kiln_attention_bwd_check": (i, [P(T["KilnAttentionBwdParams"])]),
            "kiln_attention_bwd_scratch_size": (sz, [P(T["KilnAttentionBwdParams"])]),
            "kiln_attention_bwd_scratch_size_sm": (sz, [P(T["KilnAttentionBwdParams"]), i]),
            "kiln_attention_bwd": (i, [vp, P(T["KilnAttentionBwdParams"]), vp]),
            "kiln_attention_bwd_cpu": (i, [P(T["KilnAttentionBwdParams"])]),
            "kiln_attention_decode_check": (i, [P(T["KilnAttentionDecodeParams"])]),
            "kiln_attention_decode_splits": (i, [P(T["KilnAttentionDecodeParams"]), i]),
            "kiln_attention_decode_workspace": (sz, [P(T["KilnAttentionDecodeParams"]), i]),
            "kiln_attention_decode": (i, [vp, P(T["KilnAttentionDecodeParams"]), vp]),
            "kiln_attention_decode_cpu": (i, [P(T["KilnAttentionDecodeParams"])]),
            "kiln_attention_block_mask_size": (sz, [P(T["KilnAttentionParams"]), P(T["KilnBlockMask"])]),
            "kiln_attention_block_mask_create": (i, [vp, P(T["KilnAttentionParams"]), P(T["KilnBlockMask"]), vp]),
            "kiln_attention_block_mask_create_cpu": (i, [P(T["KilnAttentionParams"]), P(T["KilnBlockMask"])]),
        }
        for name, (res, args) in sig.items():
            f = getattr(self.cdll, name, None)
            if f is None:   # an older library: the calls it lacks fail when made
                continue
            f.restype, f.argtypes = res, args
            setattr(self, name, f)

    def new(self, name, **fields):
        """A zeroed struct of the headers' type `name`, with `fields` set (dotted names for
        nested structs: new("KilnAttentionBwdParams", **{"fwd.batch": 2}))."""
        return set_fields(self.types[name](), fields)

    def last_error(self):
        return (self.kiln_last_error() or b"").decode(errors="replace")

    def status_name(self, status):
        return self._status_names.get(status, f"status {status}")

    def check(self, status, what):
        """Raise unless status is KILN_OK: CompileError (the diagnostics), ValueError (bad
        arguments), TypeError (kernel arguments), NotImplementedError (unsupported), else
        KilnError; the message is kiln_last_error()."""
        if status == 0:
            return
        name = self.status_name(status)
        msg = self.last_error()
        exc = _EXC.get(name, KilnError)
        if exc is CompileError or issubclass(exc, KilnError):
            raise exc(msg if exc is CompileError else f"{what}: {name}: {msg}", status)
        raise exc(msg if msg.startswith(what) else f"{what}: {msg}")

    def call(self, name, *args):
        """Call the C function `name` and raise (check) on an error status."""
        self.check(getattr(self, name)(*args), name)


_lib = None
_lock = threading.Lock()


def lib():
    """The process's Lib (loaded on first use)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = Lib()
    return _lib


def version():
    return lib().kiln_version().decode()


# ---------------- variants (KilnAttentionVariant) ----------------

class Ptr:
    """A pointer argument of a variant: an address (device, or host for the _cpu calls) and
    the buffer's size in bytes (the _cpu calls bound every access by it)."""

    def __init__(self, addr, nbytes=0):
        self.addr, self.nbytes = int(addr), int(nbytes)


def build_variant(types, consts, path=None, source=None, args=None, defines=None):
    """A KilnAttentionVariant struct: `path` (a file of the embedded library such as
    "lang/lib/variants/alibi.tile", or one on disk) and/or its `source` text; `args` {param:
    value}, Ptr for pointer params, int (passed as i64) and float (f64) scalars; `defines`
    {name: value text}. The struct keeps what it points to alive (._keep); pass
    ctypes.addressof(it) as a params struct's `variant`."""
    args, defines = args or {}, defines or {}
    arr = (types["KilnVariantArg"] * max(len(args), 1))()
    for i, (name, val) in enumerate(args.items()):
        a = arr[i]
        a.name = name.encode()
        if isinstance(val, Ptr):
            a.value.kind, a.value.v.ptr, a.bytes = consts["KILN_PARAM_PTR"], val.addr, val.nbytes
        elif isinstance(val, bool) or not isinstance(val, (int, float)):
            raise TypeError(f"variant argument {name}: {type(val).__name__} (want a tensor, int or float)")
        elif isinstance(val, int):
            a.value.kind, a.value.v.i = consts["KILN_PARAM_I64"], val
        else:
            a.value.kind, a.value.v.f64 = consts["KILN_PARAM_F64"], val
    D = types["KilnDefine"]
    defs = (D * max(len(defines), 1))(*[D(k.encode(), str(v).encode()) for k, v in defines.items()])
    v = types["KilnAttentionVariant"]()
    set_fields(v, {"source": source.encode() if source is not None else None,
                   "path": path.encode() if path is not None else None,
                   "defines": ctypes.addressof(defs), "ndefines": len(defines),
                   "args": ctypes.addressof(arr), "nargs": len(args)})
    v._keep = (arr, defs)
    return v
