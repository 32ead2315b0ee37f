#!/usr/bin/env python3
"""rename_gpuir_prefix.py — the gpuir layer's own prefix: cg_ -> gp_, Cg -> Gp, CG_ -> GP_.

The GPU IR layer (compiler/gpuir/) carried the LLVM lowering's cg_ prefix; OLD lists every
function, type and macro that gpuir defines under it (collected from its definitions, codegen's
own cg_ names and its file names cg_*.c excluded). Each is replaced as a whole word in every
file git tracks (docs/journal.md, the history, and this file excepted). No string literal holds one, so no
message and no PTX changes. Idempotent: run it again after merging a branch written against
the old names, and it renames what that branch added.

Usage: python3 tools/rename_gpuir_prefix.py [--dry-run]   (from the repository root)
Example: cg_tc_from_ir -> gp_tc_from_ir, CgTcState -> GpTcState, CG_TMA_TERMS -> GP_TMA_TERMS.
"""
import re
import subprocess
import sys

OLD = [
    'CG_MAX_DOT_OPERAND_REGS', 'CG_MAX_RANK', 'CG_MAX_REDUCE_WORK', 'CG_MAX_THREAD_REGS', 'CG_MMA_A',
    'CG_MMA_B', 'CG_MMA_C', 'CG_PIPE_MAX_CONVERTS', 'CG_TMA_ATOMS', 'CG_TMA_MAX_MAPS', 'CG_TMA_MAX_RANK',
    'CG_TMA_TERMS', 'CG_WS_LEAN_PRODUCER_REGS', 'CG_WS_PRODUCER_WARPS', 'CgAxis', 'CgAxisMap', 'CgGeom',
    'CgMmaFrag', 'CgNumbering', 'CgPass', 'CgPassCtx', 'CgPassFn', 'CgPipeLoad', 'CgPipeLoop', 'CgSmemBuf',
    'CgSpan', 'CgStmatrix', 'CgSwizzle', 'CgTcState', 'CgTmaPlan', 'CgTmaPoly', 'CgTmaTerm', 'CgTmaVal',
    'cg_atomic_scratch_bytes', 'cg_axis_alias', 'cg_axis_get', 'cg_axis_info', 'cg_axis_uniform',
    'cg_check_thread_regs', 'cg_convert_row_pad', 'cg_convert_scratch_bytes', 'cg_default_order',
    'cg_dot_mma_eligible', 'cg_dot_operand_layout', 'cg_elem_bytes', 'cg_fast_value_dim', 'cg_geom',
    'cg_geom_const_part', 'cg_geom_first_copy', 'cg_geom_index', 'cg_geom_owner', 'cg_geom_reg_delta',
    'cg_geom_reg_dims', 'cg_geom_reg_of', 'cg_geom_replicated', 'cg_geom_thread_base', 'cg_geom_warp_owner',
    'cg_gpu_pass', 'cg_gpu_pass_name', 'cg_gpu_passes', 'cg_half_cast', 'cg_layout_blocked',
    'cg_layout_default', 'cg_layout_insert_dim', 'cg_layout_is_mma', 'cg_layout_mma', 'cg_layout_mma_rn',
    'cg_layout_permute', 'cg_layout_slice', 'cg_layouts_equivalent', 'cg_ldmatrix_lane_row',
    'cg_ldmatrix_trans', 'cg_mem_vec', 'cg_mem_vec_width', 'cg_mma_choose_warps', 'cg_mma_isa_coord',
    'cg_mma_rn', 'cg_ngpu_passes', 'cg_number_ops', 'cg_op_scratch', 'cg_pass_accelerate_dot',
    'cg_pass_dot_overlap', 'cg_pass_dot_rotate', 'cg_pass_layout_assign', 'cg_pass_pingpong',
    'cg_pass_pipeline', 'cg_pass_remove_convert', 'cg_pass_sram_alloc', 'cg_pass_tma',
    'cg_pass_warp_specialize', 'cg_pipeline_converts', 'cg_pipeline_dead_in_place', 'cg_pipeline_load',
    'cg_pipeline_loops', 'cg_pipeline_of_loop', 'cg_pipeline_slice', 'cg_reduce_scratch_bytes',
    'cg_reduce_warps_along', 'cg_reduce_work', 'cg_reduce_work_elem', 'cg_run_gpu_passes', 'cg_single_user_in',
    'cg_sram_check', 'cg_sram_describe', 'cg_sram_place', 'cg_sram_stats', 'cg_stmatrix_instr',
    'cg_stmatrix_lane_row', 'cg_stmatrix_plan', 'cg_swizzle_for', 'cg_swizzle_offset', 'cg_swizzle_shift',
    'cg_tc_from_ir', 'cg_tma_nmaps', 'cg_tma_plan', 'cg_verify_gpu_ir', 'cg_verify_schedule',
    'cg_wgmma_grid_ok', 'cg_wgmma_nsplit_ok', 'cg_wgmma_offset', 'cg_wgmma_strides', 'cg_wgmma_tile_ok',
    'cg_ws_needed', 'cg_ws_refusal',
]


def new_name(t):
    for a, b in (("cg_", "gp_"), ("Cg", "Gp"), ("CG_", "GP_")):
        if t.startswith(a):
            return b + t[len(a):]
    raise ValueError(t)


def main():
    dry = "--dry-run" in sys.argv
    pat = re.compile(r"\b(" + "|".join(sorted(OLD, key=len, reverse=True)) + r")\b")
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    total = 0
    for f in files:
        if f in ("docs/journal.md", "tools/rename_gpuir_prefix.py"):   # the history; this list
            continue
        try:
            with open(f, encoding="utf-8") as fh:
                s = fh.read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        out, n = pat.subn(lambda m: new_name(m.group(1)), s)
        if n:
            total += n
            print(n, f)
            if not dry:
                with open(f, "w", encoding="utf-8") as fh:
                    fh.write(out)
    print(total, "replacements")


if __name__ == "__main__":
    main()
