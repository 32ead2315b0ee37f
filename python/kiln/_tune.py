"""kiln.tune — Kiln's autotuner (include/kiln/kiln_tune.h) from Python: the report as rows.

    rows = kiln.tune("vec_add.tile", "vec_add", args={"X": "rand:4096", "Y": "rand:4096",
                     "Z": "out:4096", "n": 4096}, grid=("4096/BLOCK",))
    rows[0]          # {'BLOCK': '128', 'num_warps': '4', 'time_ms': None, ..., 'status': 'ok'}
    rows.winner      # index of the fastest timed row, or None (nothing timed)
    rows.csv, rows.svg, rows.table   # the report's three forms, as text

The kernel's tune space is declared in the program (docs/language.md, "Tune spaces"). With
a GPU the kept configs are timed there; without one (or run="cpu") they run on the CPU
interpreter for the agreement check only; run=None compiles and prunes only. A config whose
outputs differ from config 0's beyond rtol/atol is a row with status "wrong result: ...";
check=True raises instead. Standard library only (no torch).
"""
import ctypes

from . import _capi

# a row's metrics by the report CSV's column names (KilnTuneRow's field, when it differs)
_ROW_FIELDS = ("time_ms", "tflops", "gbps", "registers", "spill_bytes", "smem_bytes", ("warps", "num_warps"),
               "occupancy", "compile_ms", "max_err")


class TuneRows(list):
    """The report's rows (dicts) in space order, with the run's facts as attributes: winner
    (index or None), kernel, device, key, compile_wall_ms, jobs, nspace, ntotal, cache_file,
    and the report as csv, table and svg text."""


def _declare(lib):
    T, P = lib.types, ctypes.POINTER
    if getattr(lib, "_tune_declared", False):
        return
    sig = {
        "kiln_tune": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, P(T["KilnTuneOptions"]),
                                     P(P(T["KilnTuneReport"]))]),
        "kiln_tune_report_free": (None, [P(T["KilnTuneReport"])]),
        "kiln_tune_report_csv": (ctypes.c_int, [P(T["KilnTuneReport"]), P(ctypes.c_void_p)]),
        "kiln_tune_report_table": (ctypes.c_int, [P(T["KilnTuneReport"]), P(ctypes.c_void_p)]),
        "kiln_tune_report_svg": (ctypes.c_int, [P(T["KilnTuneReport"]), P(ctypes.c_void_p)]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib.cdll, name)
        f.restype, f.argtypes = res, args
        setattr(lib, name, f)
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    lib._free = libc.free
    lib._tune_declared = True


def _text(lib, fn, rep):
    out = ctypes.c_void_p()
    lib.check(fn(rep, ctypes.byref(out)), fn.__name__)
    try:
        return ctypes.string_at(out.value).decode()
    finally:
        lib._free(out)


def _str(b):
    return b.decode() if b is not None else None


def _rows(lib, rep):
    r = rep.contents
    row_t = lib.types["KilnTuneRow"]
    rows = ctypes.cast(r.rows, ctypes.POINTER(row_t))
    dims = [r.dims[d].decode() for d in range(r.ndims)]
    out = TuneRows()
    for i in range(r.nrows):
        w = rows[i]
        row = {dims[d]: w.values[d].decode() for d in range(r.ndims)}
        for f in _ROW_FIELDS:
            col, field = f if isinstance(f, tuple) else (f, f)
            row[col] = getattr(w, field)
        for f, unknown in (("time_ms", -1), ("max_err", -1), ("registers", -1), ("spill_bytes", -1)):
            if row[f] <= unknown:
                row[f] = None
        for f in ("tflops", "gbps"):
            row[f] = row[f] or None
        row["status"] = _str(w.pruned) or ("winner" if i == r.winner else "ok")
        out.append(row)
    out.winner = r.winner if r.winner >= 0 else None
    out.kernel, out.device, out.key = _str(r.kernel), _str(r.device), _str(r.key)
    out.compile_wall_ms, out.jobs, out.nspace, out.ntotal = r.compile_wall_ms, r.jobs, r.nspace, r.ntotal
    out.cache_file = _str(r.cache_file)
    out.csv = _text(lib, lib.kiln_tune_report_csv, rep)
    out.table = _text(lib, lib.kiln_tune_report_table, rep)
    out.svg = _text(lib, lib.kiln_tune_report_svg, rep)
    return out


def tune(path, kernel, *, source=None, defines=None, args=None, grid=None, run="auto", jobs=0, max_spill=0,
         max_configs=0, warmup=0, repeats=0, flops=0.0, bytes=0.0, rtol=0.0, atol=0.0, store=False, key=None,
         arch=None, include_dirs=None, check=False):
    """Tune `kernel` of the program at `path` (or of `source`, named `path` in diagnostics)
    over its declared tune space; returns TuneRows (a list of dicts, one per config).

    defines: {NAME: value} fixed consts (the key's). args: {param: spec}, spec as `kiln run`
    takes it ("rand:N", "out:N", or a number). grid: up to three axes, each an int or
    "N/NAME" (cdiv(N, the config's NAME)). run: "auto" (the GPU when there is one, else the
    interpreter), "gpu", "cpu", or None (compile and prune only). The other keywords are
    KilnTuneOptions' fields (include/kiln/kiln_tune.h)."""
    lib = _capi.lib()
    _declare(lib)
    if source is None:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    keep = []   # what the options point into, alive until the call returns

    def cstr(s):
        b = ctypes.c_char_p(str(s).encode())
        keep.append(b)
        return b

    o = lib.new("KilnTuneOptions", kernel=str(kernel).encode(), jobs=jobs, max_spill_bytes=max_spill,
                max_configs=max_configs, warmup=warmup, repeats=repeats, flops=flops, bytes=bytes, rtol=rtol,
                atol=atol, store=int(store))
    keep.append(o.kernel)
    if arch:
        o.arch = cstr(arch).value
    if key is not None:
        o.key = cstr(key).value
    if defines:
        arr = (lib.types["KilnDefine"] * len(defines))()
        for i, (n, v) in enumerate(defines.items()):
            v = ("true" if v else "false") if isinstance(v, bool) else v
            arr[i].name, arr[i].value = cstr(n).value, cstr(v).value
        keep.append(arr)
        o.defines, o.ndefines = ctypes.addressof(arr), len(defines)
    if include_dirs:
        dirs = (ctypes.c_char_p * len(include_dirs))(*[str(d).encode() for d in include_dirs])
        keep.append(dirs)
        o.include_dirs, o.ninclude_dirs = ctypes.addressof(dirs), len(include_dirs)
    if args:
        specs = (ctypes.c_char_p * len(args))(*[f"{n}={v}".encode() for n, v in args.items()])
        keep.append(specs)
        o.args, o.nargs = ctypes.addressof(specs), len(args)
    for i, g in enumerate(grid or ()):
        o.grid[i] = str(g).encode()
    dev = ctypes.c_void_p()
    if args and run in ("auto", "gpu"):
        n = ctypes.c_int(0)
        has_gpu = lib.kiln_device_count(ctypes.byref(n)) == 0 and n.value > 0
        if run == "gpu" and not has_gpu:
            raise _capi.KilnError("kiln.tune: run='gpu' but no GPU: " + lib.last_error())
        if has_gpu:
            lib.call("kiln_init", ctypes.byref(dev), 0)
            o.device = dev.value
    if args and run is not None and not o.device:
        o.cpu_check = 1
    rep = ctypes.POINTER(lib.types["KilnTuneReport"])()
    try:
        st = lib.kiln_tune(str(path).encode(), source.encode(), ctypes.byref(o), ctypes.byref(rep))
        if not rep or (st != 0 and (check or lib.status_name(st) != "KILN_ERR_KERNEL")):
            lib.check(st, "kiln_tune")
        return _rows(lib, rep)
    finally:
        if rep:
            lib.kiln_tune_report_free(rep)
        if dev.value:
            lib.kiln_shutdown(dev)
