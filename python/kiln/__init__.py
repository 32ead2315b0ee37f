"""kiln — Kiln from Python: FlashAttention ops for PyTorch (forward, backward, decoding,
variants, block masks; autograd and torch.compile) and Triton-style launching of any tile
kernel, over libkiln.so (ctypes; no C extension). See docs/python.md.

Importable without torch: kiln.load / kiln.compile-time parts need only the library; the
attention ops (kiln.attention, kiln.flash_attn_*) import torch on first use.
"""
from ._capi import CompileError, KilnError, version  # noqa: F401
from ._launch import Kernel, Module, data_path, load  # noqa: F401
from ._tune import TuneRows, tune  # noqa: F401

_TORCH_NAMES = ("attention", "attention_fp8", "flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache",
                "Variant", "BlockMask", "create_block_mask")


def __getattr__(name):
    if name == "__version__":   # the library's (kiln_version), so the two never disagree
        return version()
    # the torch parts load on first use, so `import kiln` works without torch
    if name in _TORCH_NAMES:
        from . import _attention
        for n in _TORCH_NAMES:   # bound here once: later lookups skip this hook
            globals()[n] = getattr(_attention, n)
        return globals()[name]
    if name == "distributed":   # context-parallel attention (torch.distributed); imports torch
        from . import distributed
        return distributed
    raise AttributeError(f"module 'kiln' has no attribute '{name}'")


__all__ = ["CompileError", "KilnError", "Kernel", "Module", "load", "data_path", "version", "tune", "TuneRows",
           *_TORCH_NAMES]
