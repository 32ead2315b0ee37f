"""kiln._launch — any tile kernel from Python, Triton-style.

  mod = kiln.load("examples/vec_add.tile")         # a path, or the source text itself
  mod.vec_add[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
  mod.vec_add[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, y, z, n, BLOCK=256)

Positional arguments are the kernel's runtime parameters in order: a torch tensor for a
pointer parameter (its data_ptr(); CPU tensors are bound in place, bounded by the bytes their
view spans), a Python int/float/bool for a scalar (converted to the parameter's kind).
Keyword arguments are the kernel's `const`s, compiled in as -D values (True -> "true"); each
combination is compiled once per device and cached (and the compiled code in Kiln's on-disk
cache). CUDA tensors launch on torch's current stream of their device (asynchronous, like any
CUDA op); CPU tensors run on the CPU interpreter (kiln_run_cpu), synchronously.

Errors: kiln.CompileError with the compiler's located diagnostics; TypeError for the wrong
number or kind of arguments, naming the parameter; ValueError for tensors on mixed devices.
"""
import ctypes
import os
import threading

from . import _capi, _device


def _define_text(name, v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v) if not isinstance(v, float) else repr(v)
    raise TypeError(f"const '{name}': {type(v).__name__} (want bool, int, float or str)")


class _Options:
    """A KilnCompileOptions with its strings and defines kept alive."""

    def __init__(self, lib, kernel, defines, include_dirs, emit=None, num_warps=0, num_stages=0):
        D = lib.types["KilnDefine"]
        self.defs = (D * max(len(defines), 1))(*[D(k.encode(), v.encode()) for k, v in defines])
        self.dirs = (ctypes.c_char_p * max(len(include_dirs), 1))(*[d.encode() for d in include_dirs])
        self.opts = lib.new("KilnCompileOptions", kernel=kernel.encode(), defines=ctypes.addressof(self.defs),
                            ndefines=len(defines), include_dirs=ctypes.addressof(self.dirs),
                            ninclude_dirs=len(include_dirs), num_warps=num_warps, num_stages=num_stages)
        if emit is not None:
            self.opts.emit = lib.consts[emit]


def _params(lib, info_ptr):
    """[(name, kind, pointee_bits)] of a KilnKernelInfo*."""
    info = info_ptr.contents if hasattr(info_ptr, "contents") else info_ptr
    P = ctypes.POINTER(lib.types["KilnParam"])
    ps = ctypes.cast(info.params, P)
    return [(ps[i].name.decode(), ps[i].kind, ps[i].pointee_bits) for i in range(info.nparams)]


class Module:
    """A .tile source: its kernels as attributes (mod.vec_add)."""

    def __init__(self, source, path="<string>", include_dirs=()):
        self.source, self.path = source, path
        dirs = list(include_dirs)
        if os.path.isfile(path):
            dirs.append(os.path.dirname(os.path.abspath(path)))
        self.include_dirs = tuple(dirs)
        self._kernels = {}
        self._src = source.encode()
        self._path = path.encode()

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        k = self._kernels.get(name)
        if k is None:
            k = self._kernels[name] = Kernel(self, name)
        return k

    def __repr__(self):
        return f"<kiln.Module {self.path}>"


class Kernel:
    """One kernel of a Module; kernel[grid](*args, **consts) launches it."""

    def __init__(self, module, name):
        self.module, self.name = module, name
        self._lock = threading.Lock()
        self._sigs = {}      # defines -> params (the CPU path's signature)
        self._loaded = {}    # (ordinal, defines, warps, stages) -> (KilnModule*, KilnKernel*, params)

    def __getitem__(self, grid):
        def launch(*args, num_warps=0, num_stages=0, **consts):
            return self.run(grid, args, consts, num_warps=num_warps, num_stages=num_stages)
        return launch

    def __repr__(self):
        return f"<kiln.Kernel {self.name} of {self.module.path}>"

    # -- compiling --
    def signature(self, **consts):
        """The runtime parameters [(name, kind, pointee_bits)] with these consts (compiled to
        Tile IR on the host; no device)."""
        defines = tuple(sorted((k, _define_text(k, v)) for k, v in consts.items()))
        return self._signature(defines)

    def _signature(self, defines):
        sig = self._sigs.get(defines)
        if sig is not None:
            return sig
        lib = _capi.lib()
        o = _Options(lib, self.name, defines, self.module.include_dirs, emit="KILN_EMIT_IR")
        res = lib.types["KilnCompileResult"]()
        st = lib.kiln_compile(self.module._path, self.module._src, ctypes.byref(o.opts), ctypes.byref(res))
        try:
            if st != 0:
                diag = (ctypes.string_at(res.diagnostics).decode(errors="replace") if res.diagnostics else "")
                if diag and lib.status_name(st) == "KILN_ERR_COMPILE":
                    raise _capi.CompileError(diag.rstrip(), st)
                lib.check(st, f"kiln.load: kernel {self.name}")
            if res.nkernels < 1:
                raise _capi.KilnError(f"{self.module.path}: no kernel {self.name}")
            info = ctypes.cast(res.kernels, ctypes.POINTER(lib.types["KilnKernelInfo"]))
            sig = _params(lib, info)
        finally:
            lib.kiln_compile_result_free(ctypes.byref(res))
        self._sigs[defines] = sig
        return sig

    def _load(self, ordinal, defines, num_warps, num_stages):
        key = (ordinal, defines, num_warps, num_stages)
        hit = self._loaded.get(key)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._loaded.get(key)
            if hit is not None:
                return hit
            lib = _capi.lib()
            dev = _device.device(ordinal)
            o = _Options(lib, self.name, defines, self.module.include_dirs, num_warps=num_warps, num_stages=num_stages)
            mod, k = ctypes.c_void_p(), ctypes.c_void_p()
            st = lib.kiln_module_compile(dev, self.module._path, self.module._src, ctypes.byref(o.opts),
                                         ctypes.byref(mod))
            if st != 0 and lib.status_name(st) == "KILN_ERR_COMPILE":
                raise _capi.CompileError(lib.last_error(), st)
            lib.check(st, f"kernel {self.name}")
            lib.call("kiln_kernel_get", mod, self.name.encode(), ctypes.byref(k))
            hit = self._loaded[key] = (mod, k, _params(lib, lib.kiln_kernel_info(k)))
            return hit

    # -- launching --
    def run(self, grid, args, consts, num_warps=0, num_stages=0):
        lib = _capi.lib()
        defines = tuple(sorted((k, _define_text(k, v)) for k, v in consts.items()))
        if callable(grid):
            grid = grid(dict(consts))
        if isinstance(grid, int):
            grid = (grid,)
        grid = tuple(int(g) for g in grid)
        if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
            raise ValueError(f"grid: 1 to 3 non-negative sizes, got {grid}")
        g3 = (ctypes.c_int * 3)(*(grid + (1,) * (3 - len(grid))))
        if 0 in grid:
            return
        tensors = [a for a in args if hasattr(a, "data_ptr") and hasattr(a, "device")]
        kinds = {t.device.type for t in tensors}
        if len(kinds) > 1 or len({str(t.device) for t in tensors}) > 1:
            raise ValueError(f"kernel {self.name}: tensors on different devices: "
                             + ", ".join(sorted({str(t.device) for t in tensors})))
        on_cuda = kinds == {"cuda"}
        if on_cuda:
            ordinal = tensors[0].device.index
            _, k, params = self._load(ordinal, defines, num_warps, num_stages)
        else:
            params = self._signature(defines)
        if len(args) != len(params):
            raise TypeError(f"kernel {self.name} takes {len(params)} runtime arguments "
                            f"({', '.join(p[0] for p in params)}), got {len(args)}")
        ptr = lib.consts["KILN_PARAM_PTR"]
        for (name, kind, bits), a in zip(params, args):
            if kind != ptr:
                continue
            if not hasattr(a, "data_ptr"):
                raise TypeError(f"argument '{name}': a pointer parameter wants a tensor, got {type(a).__name__}")
            if bits and a.element_size() * 8 != bits:
                raise TypeError(f"argument '{name}': the kernel reads {bits}-bit elements, the tensor is {a.dtype}")
        if on_cuda:
            arr = (lib.types["KilnArg"] * max(len(params), 1))()
            for i, ((name, kind, _), a) in enumerate(zip(params, args)):
                if kind == ptr:
                    arr[i].kind, arr[i].v.ptr = ptr, a.data_ptr()
                else:
                    arr[i] = _device.kiln_arg(lib, kind, a, name)
            _, stream = _device.current_stream(ordinal)
            lib.call("kiln_launch", k, ctypes.byref(g3), stream, arr, len(params))
            return
        H = lib.types["KilnHostArg"]
        arr = (H * max(len(params), 1))()
        for i, ((name, kind, _), a) in enumerate(zip(params, args)):
            if kind == ptr:
                arr[i].value.kind = ptr
                arr[i].host = a.data_ptr()
                arr[i].bytes = max(_device.span_bytes(a), 1)
                arr[i].dir = lib.consts["KILN_HOST_INOUT"]   # in place: outputs and inputs alike
            else:
                arr[i].value = _device.kiln_arg(lib, kind, a, name)
                arr[i].dir = lib.consts["KILN_HOST_IN"]
        o = _Options(lib, self.name, defines, self.module.include_dirs)
        st = lib.kiln_run_cpu(self.module._path, self.module._src, ctypes.byref(o.opts), ctypes.byref(g3), arr,
                              len(params))
        if st != 0 and lib.status_name(st) == "KILN_ERR_COMPILE":
            raise _capi.CompileError(lib.last_error(), st)
        lib.check(st, f"kernel {self.name}")


def load(path_or_source, include_dirs=()):
    """A Module from a .tile file's path or from the source text itself (any string that is not
    an existing file and contains a newline or 'kernel ')."""
    s = os.fspath(path_or_source)
    if os.path.isfile(s):
        with open(s, encoding="utf-8") as f:
            return Module(f.read(), s, include_dirs)
    if "\n" in s or "kernel " in s:
        return Module(s, "<string>", include_dirs)
    raise FileNotFoundError(f"kiln.load: no such file: {s}")


def data_path(rel):
    """The full path of a shipped file ("examples/vec_add.tile", "lib/attention_fwd.tile")."""
    lib = _capi.lib()
    buf = ctypes.create_string_buffer(4096)
    lib.call("kiln_data_path", rel.encode(), buf, len(buf))
    return buf.value.decode()
