"""kiln._attention — Kiln's FlashAttention as PyTorch ops.

Four custom ops (torch.library.custom_op, namespace `kiln`), each with a fake (meta) kernel so
torch.compile traces through them without graph breaks:
  kiln::fwd     the forward, fixed-length [b, h, s, d] (any strides) or packed varlen [t, h, d],
                a variant and a block mask optional; returns (out, lse)
  kiln::bwd     its backward (dq, dk, dv), the forward's autograd formula (register_autograd)
  kiln::decode  flash-decoding against a contiguous or paged KV cache
  kiln::block_mask  classifies the blocks of a mask (kiln.create_block_mask)
CPU tensors run on Kiln's CPU interpreter (kiln_attention_*_cpu), CUDA tensors on torch's current
stream with every buffer (scratch, decode workspace, block masks) from torch's allocator, so
CUDA-graph capture works.

The public functions over them (kiln.attention, kiln.flash_attn_func, ...) validate their
arguments first: TypeError / ValueError naming the argument, NotImplementedError for what
Kiln's programs do not cover (head dims other than 32, 64, 96, 128, 256; dtypes other than
float16 / bfloat16; dropout).

Variants (kiln.Variant) are registered in a table here and reach the ops as an int id plus the
list of their tensor params (which torch.compile sees as inputs); block masks as their data
tensor plus the integers of the C descriptor.
"""
import ctypes
import itertools
import math
import os
import re
import weakref
from typing import List, Optional, Tuple

import torch

from . import _capi, _device

_lib = _capi.lib()
_T, _C = _lib.types, _lib.consts
HEAD_DIMS = (32, 64, 96, 128, 256)
_DTYPES = {torch.float16: _C["KILN_F16"], torch.bfloat16: _C["KILN_BF16"]}

# ---------------- variants ----------------

_PARAM_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
                 "i64": torch.int64, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16}
# id -> Variant, weakly: a Variant lives as long as its caller keeps it (and an autograd graph
# that used it: setup_context holds it for the backward), its tensors with it
_variants = weakref.WeakValueDictionary()
_variant_ids = itertools.count(1)      # 0 is "no variant"


def _variant_text(source_or_path):
    """(source text or None, path): a shipped variant by short name ("alibi") or by its library
    path ("lang/lib/variants/alibi.tile"), a file on disk, or the source text itself."""
    s = os.fspath(source_or_path)
    if re.fullmatch(r"\w+", s):
        s = f"lang/lib/variants/{s}.tile"
    if s.endswith(".tile") and "\n" not in s:
        if s.startswith("lang/lib/") and _lib.kiln_lib_source(s.encode()):
            return None, s
        if os.path.isfile(s):
            with open(s, encoding="utf-8") as f:
                return f.read(), s
        raise FileNotFoundError(f"kiln.Variant: no such variant file or shipped variant: {s}")
    return s, "<variant>"


def _declared_params(text, path, seen=None):
    """{name: (ptr, type, differentiable)} of the `param`s of a variant's text and of the modules
    it imports (the shipped library's, or files next to it), each module once: a variant composed
    of shipped ones (`import "variants/alibi" as alibi;`) takes their params."""
    seen = set() if seen is None else seen
    decl = {m.group(1): (m.group(2), m.group(3), bool(m.group(4))) for m in
            re.finditer(r"^\s*param\s+(\w+)\s*:\s*(\*?)\s*(\w+)\s*(differentiable)?", text, re.M)}
    here = os.path.dirname(path) if path and not path.startswith("<") else ""
    for m in re.finditer(r'^\s*import\s+"?([\w/.]+?)(?:\.tile)?"?\s*(?:as\s+\w+\s*)?;', text, re.M):
        name = m.group(1) + ".tile"
        for cand in ([os.path.join(here, name)] if here else []) + [f"lang/lib/{name}"]:
            if cand in seen:
                break
            src = None
            if cand.startswith("lang/lib/"):
                raw = _lib.kiln_lib_source(cand.encode())
                src = raw.decode() if raw else None
            elif os.path.isfile(cand):
                with open(cand, encoding="utf-8") as f:
                    src = f.read()
            if src is not None:
                seen.add(cand)
                decl.update(_declared_params(src, cand, seen))
                break
    return decl


class Variant:
    """An attention variant: a .tile file of hooks (score_mod, mask_mod, kv_start,
    score_mod_grad) and the runtime `param`s they read, with their values.

      kiln.Variant("softcap", softcap=30.0)                       # shipped: lang/lib/variants/
      kiln.Variant("alibi", alibi_slopes=slopes)                  # a tensor param, by name
      kiln.Variant("my_variant.tile", bias=table, scale=0.5)      # a file of yours
      kiln.Variant(source_text, **params)                         # or its text

    Tensor params must be torch tensors of the param's element type, on the device of the call
    (their size is the caller's contract on the GPU; the CPU interpreter bounds every access by
    it). Scalar params are Python numbers. Compile errors surface at the first call as
    kiln.CompileError with the compiler's located diagnostics.

    Learnable params: a param declared `param X: *f32 differentiable;` (the shipped T5 bias
    rel_bias and ALiBi's alibi_slopes are) given a contiguous tensor that requires grad gets its
    gradient from the backward (X.grad after loss.backward()), bit-identical from run to run;
    set `variant.param_grads_atomic = True` to have it added with f32 atomics instead (no
    scratch rows, no reduction; the last bits vary from run to run)."""

    def __init__(self, source_or_path, **params):
        self.source, self.path = _variant_text(source_or_path)
        text = self.source if self.source is not None else _lib.kiln_lib_source(self.path.encode()).decode()
        decl = _declared_params(text, self.path)
        self.params = decl
        for name in params:
            if name not in decl:
                raise ValueError(f"kiln.Variant: '{name}' is not a param of {self.path} "
                                 f"(its params: {', '.join(decl) or 'none'})")
        missing = [n for n in decl if n not in params]
        if missing:
            raise ValueError(f"kiln.Variant: {self.path} needs a value for param(s) {', '.join(missing)}")
        self.tensors, self.scalars = {}, {}
        for name, value in params.items():
            ptr, ty, diff = decl[name]
            if diff and isinstance(value, torch.Tensor) and not value.is_contiguous():
                raise ValueError(f"kiln.Variant: differentiable param '{name}' must be a contiguous tensor "
                                 f"(its gradient is indexed like its elements)")
            if ptr:
                if not isinstance(value, torch.Tensor):
                    raise TypeError(f"kiln.Variant: param '{name}' is a pointer (*{ty}): pass a tensor, "
                                    f"got {type(value).__name__}")
                want = _PARAM_DTYPES.get(ty)
                if want is not None and value.dtype != want:
                    raise TypeError(f"kiln.Variant: param '{name}' is *{ty}: want a {want} tensor, got {value.dtype}")
                self.tensors[name] = value
            else:
                if isinstance(value, torch.Tensor) or not isinstance(value, (int, float)):
                    raise TypeError(f"kiln.Variant: param '{name}' is a scalar ({ty}): pass a Python number, "
                                    f"got {type(value).__name__}")
                if ty.startswith(("i", "u")) and not isinstance(value, int):
                    raise TypeError(f"kiln.Variant: param '{name}' is {ty}: pass an int, got {value!r}")
                self.scalars[name] = value
        self.tensor_names = sorted(self.tensors)
        # the tensor params with a gradient (indexes into tensor_names)
        self.differentiable = [i for i, n in enumerate(self.tensor_names) if decl[n][2]]
        self.param_grads_atomic = False
        self.id = next(_variant_ids)
        _variants[self.id] = self

    def tensor_list(self):
        return [self.tensors[n] for n in self.tensor_names]

    def __repr__(self):
        return f"kiln.Variant({self.path!r}, params={sorted(self.params)})"


def _variant_struct(vid, tensors):
    """The KilnAttentionVariant of variant `vid` with its tensor params `tensors` (in
    tensor_names order, as the op received them); None for vid 0."""
    if vid == 0:
        return None
    var = _variants.get(vid)
    if var is None:
        raise RuntimeError(f"kiln: variant {vid} was freed while a call still used it (keep the kiln.Variant alive)")
    args = dict(var.scalars)
    for name, t in zip(var.tensor_names, tensors):
        args[name] = _capi.Ptr(t.data_ptr(), max(_device.span_bytes(t), 1))
    return _capi.build_variant(_T, _C, path=var.path, source=var.source, args=args)


def _variant_args(variant, device, what="variant"):
    if variant is None:
        return 0, []
    if not isinstance(variant, Variant):
        raise TypeError(f"{what}: want a kiln.Variant or None, got {type(variant).__name__}")
    ts = variant.tensor_list()
    for n, t in zip(variant.tensor_names, ts):
        if t.device != device:
            raise ValueError(f"{what}: tensor param '{n}' is on {t.device}, the call on {device}")
    return variant.id, ts


# ---------------- block masks ----------------

_BM_META = ("block_q", "block_kv", "batch", "heads", "seqlen_q", "seqlen_k", "causal", "num_q_blocks",
            "num_kv_blocks")


class BlockMask:
    """Which (query block, key block) pairs of a call are full, partial or empty, per (batch,
    head) (FlexAttention's BlockMask; kiln.create_block_mask makes one). .data: the int32
    lists in one uint8 tensor on the call's device; .meta: the C descriptor's integers."""

    def __init__(self, data, meta):
        self.data, self.meta = data, list(meta)

    def __getattr__(self, name):
        if name in _BM_META:
            return self.meta[_BM_META.index(name)]
        raise AttributeError(name)

    def __repr__(self):
        return ("kiln.BlockMask(" + ", ".join(f"{n}={getattr(self, n)}" for n in _BM_META[:7]) +
                f", device={self.data.device})")


def _bm_struct(data, meta):
    if data is None:
        return None
    m = _lib.new("KilnBlockMask")
    for i, n in enumerate(_BM_META):
        setattr(m, n, meta[i])
    m.offset[:] = meta[len(_BM_META):]
    m.data, m.bytes = data.data_ptr(), data.numel()
    return m


# ---------------- the forward and backward ops ----------------

def _strides(t, varlen):
    """(batch, head, sequence) strides of a [b, h, s, d] tensor, or (0, head, token) of a
    packed [t, h, d] one."""
    if varlen:
        return (0, t.stride(1), t.stride(0))
    return (t.stride(0), t.stride(1), t.stride(2))


def _aligned(t):
    """t itself when the C API takes it as it is (head dim contiguous, 16-byte aligned address
    and strides), else a dense copy."""
    st = t.stride()
    if st[-1] == 1 and t.data_ptr() % 16 == 0 and all(s % 8 == 0 for s in st[:-1]):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def _dense(t):
    """True when t's elements fill its storage span exactly, in some order of its dims."""
    expected = 1
    for n, s in sorted(zip(t.shape, t.stride()), key=lambda x: x[1]):
        if n == 1:
            continue
        if s != expected:
            return False
        expected *= n
    return True


def _out_like(q):
    # q's own layout when dense (a [b, s, h, d] view stays one), else contiguous
    return torch.empty_like(q) if _dense(q) else torch.empty(q.shape, dtype=q.dtype, device=q.device)


def _lse_shape(q, varlen):
    return (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[1], q.shape[2])


_templates = {}   # shapes, strides and flags -> a filled KilnAttentionParams (the host path's cost)


def _fwd_params(q, k, v, o, lse, cu_q, cu_k, max_q, max_k, causal, scale, positions=()):
    """The KilnAttentionParams of a call: copied from a template per shape class, the pointers
    set (a struct filled field by field costs more than the rest of the call). positions: () or
    [q_pos_offset, kv_pos_offset] (whole-sequence positions, KilnAttentionParams.positions)."""
    key = (q.shape, q.stride(), k.shape, k.stride(), v.stride(), o.stride(), q.dtype, cu_q is not None, max_q, max_k,
           causal, scale)
    t = _templates.get(key)
    if t is None:
        if len(_templates) > 512:
            _templates.clear()
        t = _templates[key] = _fill_fwd_params(q, k, v, o, cu_q, max_q, max_k, causal, scale)
    p = _ParamsType.from_buffer_copy(t)
    p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr()
    if positions:
        p.positions, p.q_pos_offset, p.kv_pos_offset = 1, int(positions[0]), int(positions[1])
    if cu_q is not None:
        p.cu_seqlens_q, p.cu_seqlens_k = cu_q.data_ptr(), cu_k.data_ptr()
    if q.device.type == "cpu":   # the interpreter bounds every access by the host buffers' sizes
        p.q_bytes, p.k_bytes, p.v_bytes = _buffer_bytes(q), _buffer_bytes(k), _buffer_bytes(v)
        p.o_bytes, p.lse_bytes = _buffer_bytes(o), _buffer_bytes(lse)
        if cu_q is not None:
            p.cu_seqlens_q_bytes, p.cu_seqlens_k_bytes = _buffer_bytes(cu_q), _buffer_bytes(cu_k)
    return p


def _buffer_bytes(t):
    """Bytes of t's storage from t.data_ptr() on: what the C call may touch (a view's own span is
    at most this)."""
    return t.untyped_storage().nbytes() - t.storage_offset() * t.element_size()


_ParamsType = _T["KilnAttentionParams"]


def _fill_fwd_params(q, k, v, o, cu_q, max_q, max_k, causal, scale):
    varlen = cu_q is not None
    p = _lib.new("KilnAttentionParams")
    p.dtype = _DTYPES[q.dtype]
    p.heads_q, p.heads_kv, p.head_dim = q.shape[-2 if varlen else 1], k.shape[-2 if varlen else 1], q.shape[-1]
    if varlen:
        p.batch, p.seqlen_q, p.seqlen_k = cu_q.shape[0] - 1, max_q, max_k
        p.total_q, p.total_k = q.shape[0], k.shape[0]
    else:
        p.batch, p.seqlen_q, p.seqlen_k = q.shape[0], q.shape[2], k.shape[2]
    p.q_stride[:], p.k_stride[:] = _strides(q, varlen), _strides(k, varlen)
    p.v_stride[:], p.o_stride[:] = _strides(v, varlen), _strides(o, varlen)
    p.softmax_scale, p.causal = scale, int(causal)
    return p


def _run(q, name_cpu, name_gpu, params, what):
    """The CPU interpreter or the GPU on torch's current stream."""
    if q.device.type == "cpu":
        _lib.call(name_cpu, ctypes.byref(params))
    elif q.device.type == "cuda":
        dev, stream = _device.current_stream(q.device.index)
        _lib.call(name_gpu, dev, ctypes.byref(params), stream)
    else:
        raise NotImplementedError(f"{what}: tensors on {q.device.type} (Kiln runs on CPU and CUDA)")


def _fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: Optional[torch.Tensor],
            cu_seqlens_k: Optional[torch.Tensor], max_seqlen_q: int, max_seqlen_k: int, causal: bool,
            scale: float, deterministic: bool, variant: int, variant_tensors: List[torch.Tensor],
            bm_data: Optional[torch.Tensor], bm_meta: List[int],
            positions: List[int]) -> Tuple[torch.Tensor, torch.Tensor]:
    # deterministic is the backward's (kept for it by setup_context); positions: [] or
    # [q_pos_offset, kv_pos_offset]
    varlen = cu_seqlens_q is not None
    q, k, v = _aligned(q), _aligned(k), _aligned(v)
    o = _out_like(q)
    lse = torch.empty(_lse_shape(q, varlen), dtype=torch.float32, device=q.device)
    p = _fwd_params(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                    positions)
    _run_fwd(q, p, variant, variant_tensors, bm_data, bm_meta, "kiln.attention")
    return o, lse


def _run_fwd(q, p, vid, vts, bm_data, bm_meta, what):
    """kiln_attention_fwd(_cpu) of p with the variant and block mask attached (their structs
    live until the call returns)."""
    var = _variant_struct(vid, vts)
    bm = _bm_struct(bm_data, bm_meta)
    if var is not None:
        p.variant = ctypes.addressof(var)
    if bm is not None:
        p.block_mask = ctypes.addressof(bm)
    _run(q, "kiln_attention_fwd_cpu", "kiln_attention_fwd", p, what)


_fwd_op = torch.library.custom_op("kiln::fwd", mutates_args=())(_fwd_impl)


@_fwd_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, deterministic, variant,
      variant_tensors, bm_data, bm_meta, positions):
    varlen = cu_seqlens_q is not None
    return _out_like(q), q.new_empty(_lse_shape(q, varlen), dtype=torch.float32)


def _bwd_impl(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
            lse: torch.Tensor, cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
            max_seqlen_q: int, max_seqlen_k: int, causal: bool, scale: float, deterministic: bool, variant: int,
            variant_tensors: List[torch.Tensor], bm_data: Optional[torch.Tensor],
            bm_meta: List[int], positions: List[int]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dq, dk, dv, _ = _bwd_core(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                              scale, deterministic, variant, variant_tensors, bm_data, bm_meta, positions, False)
    return dq, dk, dv


def _bwd_params_impl(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                   lse: torch.Tensor, cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                   max_seqlen_q: int, max_seqlen_k: int, causal: bool, scale: float, deterministic: bool,
                   variant: int, variant_tensors: List[torch.Tensor], bm_data: Optional[torch.Tensor],
                   bm_meta: List[int],
                   positions: List[int]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, List[torch.Tensor]]:
    """kiln::bwd and the gradients of the variant's differentiable tensor params (in the order
    of Variant.differentiable)."""
    return _bwd_core(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                     deterministic, variant, variant_tensors, bm_data, bm_meta, positions, True)


def _bwd_core(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
              deterministic, variant, variant_tensors, bm_data, bm_meta, positions, with_params):
    varlen = cu_seqlens_q is not None
    dq, dk, dv = _out_like(q), _out_like(k), _out_like(v)
    q, k, v, out, dout, lse = (_aligned(t) for t in (q, k, v, out, dout, lse.contiguous()))
    b = _lib.new("KilnAttentionBwdParams")
    b.fwd = _fwd_params(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                        positions)
    b.dout, b.dq, b.dk, b.dv = dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr()
    b.dout_stride[:], b.dq_stride[:] = _strides(dout, varlen), _strides(dq, varlen)
    b.dk_stride[:], b.dv_stride[:] = _strides(dk, varlen), _strides(dv, varlen)
    b.deterministic = int(deterministic)
    if q.device.type == "cpu":   # the interpreter bounds every access by the host buffers' sizes
        b.dout_bytes, b.dq_bytes = _buffer_bytes(dout), _buffer_bytes(dq)
        b.dk_bytes, b.dv_bytes = _buffer_bytes(dk), _buffer_bytes(dv)
    var = _variant_struct(variant, variant_tensors)
    bm = _bm_struct(bm_data, bm_meta)
    if var is not None:
        b.fwd.variant = ctypes.addressof(var)
    if bm is not None:
        b.fwd.block_mask = ctypes.addressof(bm)
    grads, entries = [], None
    if with_params:   # every differentiable param's gradient buffer (the C API wants them all)
        idx = _variants[variant].differentiable
        names = [_variants[variant].tensor_names[i] for i in idx]
        grads = [torch.empty_like(variant_tensors[i], dtype=torch.float32) for i in idx]
        entries = (_T["KilnParamGrad"] * max(len(idx), 1))()
        for e, name, g in zip(entries, names, grads):
            e.name, e.grad, e.numel = name.encode(), g.data_ptr(), g.numel()
        b.param_grads, b.nparam_grads = ctypes.addressof(entries), len(idx)
        b.param_grads_atomic = int(bool(_variants[variant].param_grads_atomic))
    if q.device.type == "cuda":   # only what the plan on this device writes (sm_90: no f32 dQ accumulator)
        major, minor = torch.cuda.get_device_capability(q.device)
        n = _lib.kiln_attention_bwd_scratch_size_sm(ctypes.byref(b), major * 10 + minor)
    else:
        n = _lib.kiln_attention_bwd_scratch_size(ctypes.byref(b))
    scratch = torch.empty(max(n, 16), dtype=torch.uint8, device=q.device)
    b.scratch, b.scratch_size = scratch.data_ptr(), scratch.numel()
    _run(q, "kiln_attention_bwd_cpu", "kiln_attention_bwd", b, "kiln.attention (backward)")
    return dq, dk, dv, grads


# (the plain function stays callable: kiln.distributed runs it inside its own autograd Function)
_bwd_op = torch.library.custom_op("kiln::bwd", mutates_args=())(_bwd_impl)
_bwd_params_op = torch.library.custom_op("kiln::bwd_params", mutates_args=())(_bwd_params_impl)


@_bwd_params_op.register_fake
def _(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
      deterministic, variant, variant_tensors, bm_data, bm_meta, positions):
    idx = _variants[variant].differentiable
    return (_out_like(q), _out_like(k), _out_like(v),
            [torch.empty_like(variant_tensors[i], dtype=torch.float32) for i in idx])


@_bwd_op.register_fake
def _(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
      deterministic, variant, variant_tensors, bm_data, bm_meta, positions):
    return _out_like(q), _out_like(k), _out_like(v)


def _setup_fwd(ctx, inputs, output):
    (q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, deterministic, variant, vts, bm_data, bm_meta,
     positions) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, bm_data, *vts)
    ctx.args = (max_q, max_k, causal, scale, deterministic, variant, list(bm_meta), list(positions))
    ctx.variant = _variants.get(variant)   # alive until the backward has run
    # learnable params: the differentiable tensor params that require grad
    diff = ctx.variant.differentiable if ctx.variant is not None else []
    ctx.param_grads = any(vts[i].requires_grad for i in diff)


def _backward_fwd(ctx, dout, dlse):
    q, k, v, out, lse, cu_q, cu_k, bm_data, *vts = ctx.saved_tensors
    max_q, max_k, causal, scale, deterministic, variant, bm_meta, positions = ctx.args
    vgrads = [None] * len(vts)
    if ctx.param_grads:
        dq, dk, dv, pg = torch.ops.kiln.bwd_params(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, causal, scale,
                                                   deterministic, variant, vts, bm_data, bm_meta, positions)
        for i, g in zip(ctx.variant.differentiable, pg):
            vgrads[i] = g.to(vts[i].dtype) if vts[i].requires_grad else None
    else:
        dq, dk, dv = torch.ops.kiln.bwd(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, causal, scale,
                                        deterministic, variant, vts, bm_data, bm_meta, positions)
    # one entry per input of kiln::fwd, lists as lists (the autograd wrapper checks the structure:
    # a non-empty list of ints is one leaf, whose grad is None; an empty list stays a list)
    return (dq, dk, dv, None, None, None, None, None, None, None, None, vgrads, None,
            None if bm_meta else [], None if positions else [])


_fwd_op.register_autograd(_backward_fwd, setup_context=_setup_fwd)


# ---------------- decoding ----------------

def _decode_impl(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_seqlens: torch.Tensor,
               block_table: Optional[torch.Tensor], causal: bool, scale: float, num_splits: int, variant: int,
               variant_tensors: List[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    q, k_cache, v_cache = _aligned(q), _aligned(k_cache), _aligned(v_cache)
    o = _out_like(q)
    bsz, sq, hq, d = q.shape
    lse = torch.empty((bsz, hq, sq), dtype=torch.float32, device=q.device)
    p = _lib.new("KilnAttentionDecodeParams")
    p.dtype, p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.head_dim = _DTYPES[q.dtype], bsz, hq, k_cache.shape[2], sq, d
    p.q, p.o, p.lse, p.k, p.v = q.data_ptr(), o.data_ptr(), lse.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr()
    p.q_stride[:] = (q.stride(0), q.stride(2), q.stride(1))
    p.o_stride[:] = (o.stride(0), o.stride(2), o.stride(1))
    p.k_stride[:] = (k_cache.stride(0), k_cache.stride(2), k_cache.stride(1))
    p.v_stride[:] = (v_cache.stride(0), v_cache.stride(2), v_cache.stride(1))
    p.cache_seqlens = cache_seqlens.data_ptr()
    if block_table is not None:
        p.block_table, p.block_table_stride = block_table.data_ptr(), block_table.stride(0)
        p.page_size, p.num_pages = k_cache.shape[1], k_cache.shape[0]
        p.max_seqlen_k = block_table.shape[1] * k_cache.shape[1]
    else:
        p.max_seqlen_k = k_cache.shape[1]
    p.softmax_scale, p.causal = scale, int(causal)
    if q.device.type == "cpu":   # the interpreter bounds every access by the host buffers' sizes
        p.q_bytes, p.o_bytes, p.lse_bytes = _buffer_bytes(q), _buffer_bytes(o), _buffer_bytes(lse)
        p.k_bytes, p.v_bytes = _buffer_bytes(k_cache), _buffer_bytes(v_cache)
        p.cache_seqlens_bytes = _buffer_bytes(cache_seqlens)
        if block_table is not None:
            p.block_table_bytes = _buffer_bytes(block_table)
    var = _variant_struct(variant, variant_tensors)
    if var is not None:
        p.variant = ctypes.addressof(var)
    keep = None
    if q.device.type == "cuda":
        # the splits and their workspace decided here, the workspace from torch's allocator
        p.num_splits = num_splits
        splits = _lib.kiln_attention_decode_splits(ctypes.byref(p), _device.sm_count(q.device.index))
        p.num_splits, p.combine = splits, _C["KILN_DECODE_COMBINE_KERNEL"]
        n = _lib.kiln_attention_decode_workspace(ctypes.byref(p), splits)
        if n:
            keep = torch.empty(n, dtype=torch.uint8, device=q.device)
            p.workspace, p.workspace_size = keep.data_ptr(), n
    _run(q, "kiln_attention_decode_cpu", "kiln_attention_decode", p, "kiln.flash_attn_with_kvcache")
    return o, lse


_decode_op = torch.library.custom_op("kiln::decode", mutates_args=())(_decode_impl)


def _eager(tensors):
    """True when a call may skip torch's dispatcher and run the op's implementation directly:
    eager mode (not tracing, no dispatch mode such as FakeTensorMode active), plain tensors, and
    nothing to differentiate. The op is what runs otherwise (torch.compile, autograd,
    opcheck). Saves the custom-op machinery's host cost (~30 us a call) in inference loops."""
    if torch.compiler.is_compiling() or _dispatch_mode() is not None or _functorch():
        return False
    grad = torch.is_grad_enabled()
    for t in tensors:
        if type(t) is not torch.Tensor or (grad and t.requires_grad):
            return False
    return True


_functorch = getattr(torch._C, "_are_functorch_transforms_active", lambda: True)


from torch.utils._python_dispatch import _get_current_dispatch_mode as _dispatch_mode  # noqa: E402


@_decode_op.register_fake
def _(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, num_splits, variant, variant_tensors):
    return _out_like(q), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


# ---------------- block masks ----------------

def _block_mask_make(device, batch, heads, seqlen_q, seqlen_k, causal, block_q, block_kv, mask_batch, mask_heads,
                     variant, variant_tensors):
    p = _lib.new("KilnAttentionParams", dtype=_C["KILN_F16"], batch=batch, heads_q=heads, heads_kv=heads,
                 seqlen_q=seqlen_q, seqlen_k=seqlen_k, head_dim=64, causal=int(causal))
    var = _variant_struct(variant, variant_tensors)
    if var is not None:
        p.variant = ctypes.addressof(var)
    m = _lib.new("KilnBlockMask", block_q=block_q, block_kv=block_kv, batch=mask_batch, heads=mask_heads)
    n = _lib.kiln_attention_block_mask_size(ctypes.byref(p), ctypes.byref(m))
    if n == 0:   # the create call says why
        _lib.call("kiln_attention_block_mask_create_cpu", ctypes.byref(p), ctypes.byref(m))
    data = torch.empty(n, dtype=torch.uint8, device=device)
    m.data, m.bytes = data.data_ptr(), n
    if data.device.type == "cpu":
        _lib.call("kiln_attention_block_mask_create_cpu", ctypes.byref(p), ctypes.byref(m))
    else:
        dev, stream = _device.current_stream(data.device.index)
        _lib.call("kiln_attention_block_mask_create", dev, ctypes.byref(p), ctypes.byref(m), stream)
    meta = [getattr(m, f) for f in _BM_META] + list(m.offset)
    return BlockMask(data, meta)


def create_block_mask(mask, B, H, Q_LEN, KV_LEN, device="cpu", BLOCK_SIZE=128, causal=False, heads=None):
    """A BlockMask for calls of Q_LEN queries and KV_LEN keys (FlexAttention's
    create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device, BLOCK_SIZE)): `mask` is a
    kiln.Variant whose mask_mod (and kv_start) decide visibility, or None for the causal mask
    alone; B / H None (or 1) when the mask depends on no batch / head (stored once). The call's
    batch and heads must then match B and H (or be anything where they are None). BLOCK_SIZE:
    an int or (block_q, block_kv), powers of two in [16, 1024]. Runs once, eagerly, on `device`."""
    device = torch.device(device)
    bq, bkv = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    for name, val in (("Q_LEN", Q_LEN), ("KV_LEN", KV_LEN)):
        if not isinstance(val, int) or val < 0:
            raise ValueError(f"create_block_mask: {name} must be a non-negative int, got {val!r}")
    mb, mh = B or 1, H or 1
    vid, vts = _variant_args(mask, device, "create_block_mask: mask")
    return _block_mask_make(device, mb, mh, Q_LEN, KV_LEN, causal, bq, bkv, mb, mh, vid, vts)


def _bm_args(block_mask, q, causal, seqlen_q, seqlen_k):
    if block_mask is None:
        return None, []
    if not isinstance(block_mask, BlockMask):
        raise TypeError(f"block_mask: want a kiln.BlockMask or None, got {type(block_mask).__name__}")
    if block_mask.data.device != q.device:
        raise ValueError(f"block_mask: on {block_mask.data.device}, the call on {q.device}")
    if (block_mask.seqlen_q, block_mask.seqlen_k) != (seqlen_q, seqlen_k) or bool(block_mask.causal) != causal:
        raise ValueError(f"block_mask: made for {block_mask.seqlen_q} x {block_mask.seqlen_k} queries x keys, "
                         f"causal={bool(block_mask.causal)}; the call is {seqlen_q} x {seqlen_k}, causal={causal}")
    return block_mask.data, block_mask.meta


# ---------------- the public calls ----------------

def _check_qkv(q, k, v, ndim, layout):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: want a torch.Tensor, got {type(t).__name__}")
        if t.dim() != ndim:
            raise ValueError(f"{name}: want a {ndim}-D tensor {layout}, got shape {tuple(t.shape)}")
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name}: dtype {t.dtype}: Kiln's attention takes torch.float16 or torch.bfloat16")
        if t.device != q.device:
            raise ValueError(f"{name}: on {t.device}, q on {q.device}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"q, k, v: one dtype wanted, got {q.dtype}, {k.dtype}, {v.dtype}")
    d = q.shape[-1]
    if k.shape[-1] != d or v.shape[-1] != d:
        raise ValueError(f"q, k, v: one head dim wanted, got {q.shape[-1]}, {k.shape[-1]}, {v.shape[-1]}")
    if d not in HEAD_DIMS:
        raise NotImplementedError(f"q: head dim {d}: Kiln's programs take {', '.join(map(str, HEAD_DIMS))}")


def _scale(scale, d):
    if scale is None:
        return 1.0 / math.sqrt(d)
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not scale > 0:
        raise ValueError(f"scale: want a positive float, got {scale!r}")
    return float(scale)


def _positions(q_pos_offset, kv_pos_offset):
    """[] (local indices) or [q_pos_offset, kv_pos_offset], validated."""
    if q_pos_offset is None and kv_pos_offset is None:
        return []
    out = []
    for name, x in (("q_pos_offset", q_pos_offset), ("kv_pos_offset", kv_pos_offset)):
        x = 0 if x is None else x
        if not isinstance(x, int) or isinstance(x, bool) or x < 0 or x >= 2 ** 31:
            raise ValueError(f"{name}: want an int in [0, 2**31), got {x!r}")
        out.append(int(x))
    return out


def _row(t):
    """t with its head dim contiguous (the only stride the programs fix)."""
    return t if t.stride(-1) == 1 else t.contiguous()


def attention(q, k, v, causal=False, scale=None, variant=None, block_mask=None, return_lse=False,
              deterministic=False, q_pos_offset=None, kv_pos_offset=None):
    """softmax(scale * q k^T) v, SDPA's [batch, heads, seq, head_dim] convention, any strides (a
    [b, s, h, d] tensor passed as x.transpose(1, 2) costs nothing); k and v may have fewer
    heads than q (GQA / MQA: heads_q a multiple). causal: bottom-right aligned. variant: a
    kiln.Variant; block_mask: a kiln.BlockMask made for this call's lengths and causal flag.
    Returns out (q's shape and layout), and with return_lse the log-sum-exp [b, h, s] in
    float32 (natural log; not differentiated). Differentiable in q, k, v (the backward is Kiln's;
    deterministic=True: bit-identical gradients run to run). q_pos_offset / kv_pos_offset (either
    set: whole-sequence positions, the other 0): q's row i is at position q_pos_offset + i and k's
    key j at kv_pos_offset + j, for a shard of a longer sequence (context parallelism,
    kiln.distributed); the variant's hooks see these positions and causal compares them
    (key visible iff its position <= the query's). Not with block_mask."""
    _check_qkv(q, k, v, 4, "[batch, heads, seq, head_dim]")
    b, hq, sq, d = q.shape
    if k.shape[0] != b or v.shape[0] != b:
        raise ValueError(f"k, v: batch {k.shape[0]}, {v.shape[0]}; q has {b}")
    if k.shape != v.shape:
        raise ValueError(f"k, v: one shape wanted, got {tuple(k.shape)} and {tuple(v.shape)}")
    if hq % k.shape[1]:
        raise ValueError(f"k: {k.shape[1]} heads do not divide q's {hq} (GQA needs heads_q % heads_kv == 0)")
    vid, vts = _variant_args(variant, q.device)
    bm_data, bm_meta = _bm_args(block_mask, q, bool(causal), sq, k.shape[2])
    positions = _positions(q_pos_offset, kv_pos_offset)
    if positions and block_mask is not None:
        raise NotImplementedError("q_pos_offset / kv_pos_offset with a block_mask (the mask is made for local indices)")
    args = (_row(q), _row(k), _row(v), None, None, 0, 0, bool(causal), _scale(scale, d), bool(deterministic), vid,
            vts, bm_data, bm_meta, positions)
    fn = _fwd_impl if _eager((q, k, v, *vts)) else torch.ops.kiln.fwd
    out, lse = fn(*args)
    return (out, lse) if return_lse else out


def attention_fp8(q, k, v, q_descale, k_descale, v_descale, causal=False, scale=None, out_dtype=None, variant=None,
                  block_mask=None, return_lse=False):
    """The FP8 forward (KILN_E4M3, docs/attention_api.md "FP8"): q, k, v torch.float8_e4m3fn
    [batch, heads, seq, head_dim] (any strides, head dim contiguous) whose values are code *
    descale; q_descale, k_descale, v_descale float32 tensors: one element each (per tensor) or
    q_descale [batch, heads_q] and k/v_descale [batch, heads_kv] (per (batch, head), as
    FlashAttention-3's descale_q/k/v). out: out_dtype (torch.float16, the default, or
    torch.bfloat16) in q's shape; with return_lse also the float32 LSE [b, h, s]. variant and
    block_mask as in kiln.attention (the hooks see the descaled scores). Forward only (no
    autograd); CPU tensors run on the interpreter, CUDA ones need sm_89 or newer."""
    fp8 = getattr(torch, "float8_e4m3fn", None)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dtype != fp8:
            raise TypeError(f"{name}: want a torch.float8_e4m3fn tensor, got {getattr(t, 'dtype', type(t).__name__)}")
        if t.dim() != 4:
            raise ValueError(f"{name}: want a 4-D tensor [batch, heads, seq, head_dim], got {tuple(t.shape)}")
        if t.device != q.device:
            raise ValueError(f"{name}: on {t.device}, q on {q.device}")
    b, hq, sq, d = q.shape
    hkv = k.shape[1]
    if k.shape != v.shape or k.shape[0] != b or k.shape[-1] != d or hq % hkv:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: want k and v alike, q's batch "
                         "and head dim, heads_q a multiple of heads_kv")
    if d not in HEAD_DIMS:
        raise NotImplementedError(f"q: head dim {d}: Kiln's programs take {', '.join(map(str, HEAD_DIMS))}")
    out_dtype = torch.float16 if out_dtype is None else out_dtype
    if out_dtype not in _DTYPES:
        raise TypeError(f"out_dtype: want torch.float16 or torch.bfloat16, got {out_dtype}")
    ds = []
    for name, t, n in (("q_descale", q_descale, hq), ("k_descale", k_descale, hkv), ("v_descale", v_descale, hkv)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or t.device != q.device:
            raise TypeError(f"{name}: want a float32 tensor on {q.device}")
        ds.append((t.contiguous(), n))
    per_head = ds[0][0].numel() != 1
    for (t, n), name in zip(ds, ("q_descale", "k_descale", "v_descale")):
        if t.numel() != (b * n if per_head else 1):
            raise ValueError(f"{name}: {t.numel()} elements; want 1 (per tensor) or batch * heads = {b * n} "
                             "(per head), the same form for all three")
    # 16-byte aligned copies where needed (the descales: tiny)
    q, k, v = (x if x.stride(-1) == 1 and x.data_ptr() % 16 == 0 else x.contiguous() for x in (q, k, v))
    dq, dk, dv = (t if t.data_ptr() % 16 == 0 else t.clone() for t, _ in ds)
    o = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
    p = _lib.new("KilnAttentionParams")
    p.dtype, p.out_dtype = _C["KILN_E4M3"], _DTYPES[out_dtype]
    p.batch, p.heads_q, p.heads_kv, p.head_dim, p.seqlen_q, p.seqlen_k = b, hq, hkv, d, sq, k.shape[2]
    p.q_stride[:], p.k_stride[:] = _strides(q, False), _strides(k, False)
    p.v_stride[:], p.o_stride[:] = _strides(v, False), _strides(o, False)
    p.softmax_scale, p.causal = _scale(scale, d), int(bool(causal))
    p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr()
    p.descale_per_head = int(per_head)
    p.q_descale, p.k_descale, p.v_descale = dq.data_ptr(), dk.data_ptr(), dv.data_ptr()
    if q.device.type == "cpu":
        p.q_bytes, p.k_bytes, p.v_bytes = _buffer_bytes(q), _buffer_bytes(k), _buffer_bytes(v)
        p.o_bytes, p.lse_bytes = _buffer_bytes(o), _buffer_bytes(lse)
        p.q_descale_bytes, p.k_descale_bytes, p.v_descale_bytes = (_buffer_bytes(t) for t in (dq, dk, dv))
    vid, vts = _variant_args(variant, q.device)
    bm_data, bm_meta = _bm_args(block_mask, q, bool(causal), sq, k.shape[2])
    _run_fwd(q, p, vid, vts, bm_data, bm_meta, "kiln.attention_fp8")
    return (o, lse) if return_lse else o


def _flash_variant(window_size, softcap, alibi_slopes, device):
    """The shipped variant flash-attn's window_size / softcap / alibi_slopes ask for."""
    wanted = []
    if tuple(window_size) != (-1, -1):
        wanted.append(("sliding_window", {"window_left": int(window_size[0]), "window_right": int(window_size[1])}))
    if softcap:
        wanted.append(("softcap", {"softcap": float(softcap)}))
    if alibi_slopes is not None:
        if alibi_slopes.dim() != 1:
            raise NotImplementedError("alibi_slopes: Kiln's alibi variant takes one slope per head ([nheads])")
        wanted.append(("alibi", {"alibi_slopes": alibi_slopes.to(device=device, dtype=torch.float32).contiguous()}))
    if len(wanted) > 1:
        raise NotImplementedError("window_size, softcap and alibi_slopes: one at a time (write a kiln.Variant "
                                  "with both hooks for more)")
    if not wanted:
        return None
    # one Variant per setting (and slopes tensor), so torch.compile sees the same one call after call
    key = (wanted[0][0], tuple(sorted(wanted[0][1].items())) if alibi_slopes is None else
           (id(alibi_slopes), alibi_slopes.data_ptr(), alibi_slopes._version))
    hit = _flash_variants.get(key)
    if hit is None:
        if len(_flash_variants) > 64:
            _flash_variants.clear()
        hit = _flash_variants[key] = Variant(wanted[0][0], **wanted[0][1])
    return hit


_flash_variants = {}


def _no_dropout(dropout_p):
    if dropout_p:
        raise NotImplementedError("dropout_p: Kiln's attention has no dropout")


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn.flash_attn_func: q [batch, seqlen_q, nheads, d], k, v [batch, seqlen_k,
    nheads_k, d]; returns out [batch, seqlen_q, nheads, d] (and with return_attn_probs, as
    flash-attn, (out, softmax_lse, None))."""
    _no_dropout(dropout_p)
    _check_qkv(q, k, v, 4, "[batch, seq, heads, head_dim]")
    var = _flash_variant(window_size, softcap, alibi_slopes, q.device)
    out, lse = attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal,
                         scale=softmax_scale, variant=var, return_lse=True, deterministic=deterministic)
    out = out.transpose(1, 2)
    return (out, lse, None) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn.flash_attn_varlen_func: sequences packed along the token axis, q [total_q,
    nheads, d], k, v [total_k, nheads_k, d], cu_seqlens_* int32 [batch + 1] prefix sums on q's
    device, max_seqlen_* the longest lengths. Returns out [total_q, nheads, d]."""
    _no_dropout(dropout_p)
    if block_table is not None:
        raise NotImplementedError("block_table: paged K/V in the varlen forward (use flash_attn_with_kvcache)")
    _check_qkv(q, k, v, 3, "[total_tokens, heads, head_dim]")
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if not isinstance(cu, torch.Tensor) or cu.dtype != torch.int32 or cu.dim() != 1:
            raise TypeError(f"{name}: want a 1-D torch.int32 tensor of batch + 1 prefix sums")
        if cu.device != q.device:
            raise ValueError(f"{name}: on {cu.device}, q on {q.device}")
    if cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise ValueError("cu_seqlens_q, cu_seqlens_k: one batch wanted")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"k: {k.shape[1]} heads do not divide q's {q.shape[1]}")
    var = _flash_variant(window_size, softcap, alibi_slopes, q.device)
    vid, vts = _variant_args(var, q.device)
    args = (_row(q), _row(k), _row(v), cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous(), int(max_seqlen_q),
            int(max_seqlen_k), bool(causal), _scale(softmax_scale, q.shape[-1]), bool(deterministic), vid, vts,
            None, [], [])
    fn = _fwd_impl if _eager((q, k, v, *vts)) else torch.ops.kiln.fwd
    out, lse = fn(*args)
    return (out, lse, None) if return_attn_probs else out


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None,
                            cache_batch_idx=None, cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
                            alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """flash_attn.flash_attn_with_kvcache: q [batch, seqlen_q (1..16), nheads, d] against
    k_cache / v_cache [batch, seqlen_cache, nheads_k, d], or paged [num_blocks, page_size,
    nheads_k, d] with block_table int32 [batch, max_blocks]; cache_seqlens (int or int32
    [batch]) the keys each sequence holds. k, v [batch, seqlen_new, nheads_k, d]: appended to
    the caches in place at cache_seqlens first (as flash-attn does), then attended to.
    Returns out [batch, seqlen_q, nheads, d] (and softmax_lse [batch, nheads, seqlen_q])."""
    for name, val in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin), ("cache_batch_idx", cache_batch_idx),
                      ("cache_leftpad", cache_leftpad)):
        if val is not None:
            raise NotImplementedError(f"{name}: not supported by kiln.flash_attn_with_kvcache")
    _check_qkv(q, k_cache, v_cache, 4, "[batch, seq, heads, head_dim]")
    bsz, sq, hq, d = q.shape
    if not 1 <= sq <= 16:
        raise NotImplementedError(f"q: {sq} new tokens per sequence; Kiln's decode takes 1 to 16")
    if k_cache.shape != v_cache.shape:
        raise ValueError("k_cache, v_cache: one shape wanted")
    if hq % k_cache.shape[2]:
        raise ValueError(f"k_cache: {k_cache.shape[2]} heads do not divide q's {hq}")
    if block_table is not None:
        if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != bsz:
            raise TypeError("block_table: want an int32 tensor [batch, max_blocks_per_seq]")
        cap = block_table.shape[1] * k_cache.shape[1]
    else:
        if k_cache.shape[0] != bsz:
            raise ValueError(f"k_cache: batch {k_cache.shape[0]}, q has {bsz}")
        cap = k_cache.shape[1]
    if cache_seqlens is None:
        cache_seqlens = torch.full((bsz,), cap, dtype=torch.int32, device=q.device)
    elif isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((bsz,), cache_seqlens, dtype=torch.int32, device=q.device)
    elif cache_seqlens.dtype != torch.int32 or cache_seqlens.shape != (bsz,):
        raise TypeError("cache_seqlens: want an int or an int32 tensor [batch]")
    if (k is None) != (v is None):
        raise ValueError("k, v: both or neither")
    if k is not None:
        _append_kv(k_cache, v_cache, k, v, cache_seqlens, block_table)
        cache_seqlens = cache_seqlens + k.shape[1]
    var = _flash_variant(window_size, softcap, alibi_slopes, q.device)
    vid, vts = _variant_args(var, q.device)
    args = (_row(q), k_cache, v_cache, cache_seqlens.to(torch.int32).contiguous(), block_table, bool(causal),
            _scale(softmax_scale, d), int(num_splits), vid, vts)
    fn = _decode_impl if _eager((q, k_cache, v_cache, *vts)) else torch.ops.kiln.decode
    out, lse = fn(*args)
    return (out, lse) if return_softmax_lse else out


def _append_kv(k_cache, v_cache, k, v, cache_seqlens, block_table):
    """k, v [batch, n, heads_k, d] written into the caches at positions cache_seqlens + i."""
    bsz, n = k.shape[0], k.shape[1]
    pos = cache_seqlens.long()[:, None] + torch.arange(n, device=k.device)[None, :]      # [b, n]
    if block_table is None:
        bidx = torch.arange(bsz, device=k.device)[:, None].expand(bsz, n)
        k_cache[bidx, pos] = k.to(k_cache.dtype)
        v_cache[bidx, pos] = v.to(v_cache.dtype)
    else:
        page = k_cache.shape[1]
        pages = torch.gather(block_table.long(), 1, pos // page)
        k_cache[pages, pos % page] = k.to(k_cache.dtype)
        v_cache[pages, pos % page] = v.to(v_cache.dtype)
