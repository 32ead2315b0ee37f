/* test_e2e_gpu_attention_fp8.c — the FP8 forward (dtype KILN_E4M3) through kiln_attention_fwd
 * on the GPU (sm_89 or newer), against float64.
 *
 * The problems and the rule are tests/attention/fp8_harness.h's, as on the interpreter
 * (test_e2e_attn_fp8.c): random Q, K, V quantised to e4m3 with descales per tensor or per
 * (batch, head); the reference is float64 attention on the dequantised values; the kernel's
 * RMSE must stay within twice that of an FP8 emulation in double (P quantised as the kernel
 * does) plus O's rounding, the LSE within 1e-4 relative; O and LSE poisoned before the call.
 * Cases: f16/bf16 out, head dims 64, 128, 256, causal, GQA, ragged lengths (seqlen_q <
 * seqlen_k, no multiples of the tiles), the default tiles and schedules of the runtime, the
 * soft-capping and sliding-window variants and the window's block mask (made on the GPU).
 * Each case runs twice: as the runtime compiles it (on sm_90a the dots on FP8 wgmma where the
 * tiles allow, docs/tensor_cores.md 4e) and with schedule.no_fp8_wgmma (the dots widened to
 * f16, the fallback; rows marked "[widened]"). One ROW line per run, then PASS/FAIL.
 *
 * KILN_FP8_BENCH=1: timing instead, FP8 against the f16 forward on the same shapes (B 2,
 * H 16, N 4096 and 8192, d 128 and 256, causal and not): "BENCH" lines with ms and TFLOP/s
 * (4 * visible pairs * d flops), mean of 20 back-to-back calls after a warm one, for the
 * FP8 forward as compiled (e4m3), widened (no_fp8_wgmma), with overlap (schedule.overlap, which
 * the runtime leaves off for FP8) and the f16 forward.
 *
 * Without a GPU: "SKIP: no GPU (...)" and exit 77; on a GPU older than sm_89, SKIP too
 * (no e4m3 conversions there).
 */
#include "kiln.h"
#include "tests/gpu/gpu_util.h"
#include "tests/attention/fp8_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static KilnDevice *g_dev;
static int g_fail;

static const F8Case k_cases[] = {
    {"f16 per-tensor d128 999x999", 0, 0, 1, 4, 4, 999, 999, 128, 0, NULL, 0},
    {"bf16 per-head d128 causal GQA", 1, 1, 2, 4, 2, 515, 515, 128, 1, NULL, 0},
    {"f16 per-head d64 causal 77x1000", 0, 1, 1, 2, 1, 77, 1000, 64, 1, NULL, 0},
    {"bf16 per-tensor d256 333x333", 1, 0, 1, 2, 2, 333, 333, 256, 0, NULL, 0},
    {"f16 per-head d64 1x17", 0, 1, 1, 2, 2, 1, 17, 64, 0, NULL, 0},
    {"softcap 2 f16 per-head d128", 0, 1, 1, 2, 2, 300, 300, 128, 0, "softcap", 0},
    {"window 9/3 bf16 causal d64", 1, 0, 1, 2, 1, 400, 400, 64, 1, "window", 0},
    {"window 20/0 block mask f16 d128", 0, 1, 1, 2, 2, 500, 500, 128, 0, "window", 1},
};

static KilnDevPtr up(const void *host, size_t bytes) { return gu_upload(g_dev, host, bytes); }

static void run_case(const F8Case *c, unsigned seed, bool widened)
{
    Prob p;
    double amp = c->per_head ? 2.0 : 1.0;
    prob_init(&p, c, seed, amp, amp, false, c->per_head);
    Hooks hk = hooks_of(c);
    KilnVariantArg args[2];
    KilnAttentionVariant var;
    bool have_var = fp8_variant(c, args, &var);
    KilnAttentionParams a = params_of(&p, have_var ? &var : NULL, NULL);
    a.block_m = a.block_n = 0;   /* the runtime's defaults */
    a.schedule.no_fp8_wgmma = widened ? 1 : -1;   /* -1: FP8 wgmma (the runtime's default is widened) */
    char what[64];
    snprintf(what, sizeof what, "%s%s", c->what, widened ? " [widened]" : "");
    size_t nd = (size_t)c->batch * c->hq * 4, lse_bytes = (size_t)c->batch * c->hq * c->sq * 4;
    fp8_poison(&p);
    a.q = up(p.q8, (size_t)p.nq), a.k = up(p.k8, (size_t)p.nk), a.v = up(p.v8, (size_t)p.nk);
    a.q_descale = up(p.qd, nd), a.k_descale = up(p.kd, nd), a.v_descale = up(p.vd, nd);
    a.o = up(p.o, (size_t)p.nq * 2), a.lse = up(p.lse, lse_bytes);
    KilnBlockMask bm = {.block_q = 128, .block_kv = 128, .batch = 1, .heads = 1};
    KilnStatus st = KILN_OK;
    if (c->block_mask) {
        bm.bytes = kiln_attention_block_mask_size(&a, &bm);
        bm.data = up(NULL, bm.bytes);
        st = kiln_attention_block_mask_create(g_dev, &a, &bm, NULL);
        a.block_mask = &bm;
    }
    double t0 = gu_now_ms();
    if (st == KILN_OK) st = kiln_attention_fwd(g_dev, &a, NULL);
    if (st == KILN_OK) st = kiln_synchronize(g_dev);
    double ms = gu_now_ms() - t0;
    if (st != KILN_OK) {
        printf("ROW %-45s FAIL %s: %s\n", what, kiln_status_name(st), kiln_last_error());
        g_fail++;
    } else {
        kiln_memcpy_dtoh(g_dev, p.o, a.o, (size_t)p.nq * 2);
        kiln_memcpy_dtoh(g_dev, p.lse, a.lse, lse_bytes);
        Verdict v = fp8_judge(&p, &hk);
        double bound = fp8_bound(c, &v);
        bool ok = v.nonfinite == 0 && v.rmse <= bound && v.lse_rel <= 1e-4;
        printf("ROW %-45s %s rmse %.3g (emulation %.3g, bound %.3g, rms %.3g) lse %.3g nonfinite %lld first %.0f ms\n",
               what, ok ? "ok  " : "FAIL", v.rmse, v.rmse_emul, bound, v.rms_ref, v.lse_rel, v.nonfinite, ms);
        g_fail += !ok;
    }
    KilnDevPtr bufs[] = {a.q, a.k, a.v, a.q_descale, a.k_descale, a.v_descale, a.o, a.lse,
                         c->block_mask ? bm.data : 0};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) kiln_free(g_dev, bufs[i]);
    prob_free(&p);
}

/* ---- timing (KILN_FP8_BENCH=1) ---- */

static void bench(void)
{
    static const int shapes[][3] = {{4096, 128, 0}, {4096, 128, 1}, {8192, 128, 0}, {8192, 128, 1},
                                    {4096, 256, 0}, {4096, 256, 1}};
    const int B = 2, H = 16;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], D = shapes[s][1], causal = shapes[s][2];
        size_t n = (size_t)B * N * H * D;
        /* random bytes of moderate e4m3 codes (|x| <= 1.875) and f16 values alike */
        uint8_t *q8 = malloc(n);
        uint16_t *h16 = malloc(n * 2);
        uint64_t rs = 99;
        for (size_t i = 0; i < n; i++) {
            float x = gu_rnd(&rs, 1.0f);
            q8[i] = kiln_f32_to_e4m3(x);
            h16[i] = kiln_f32_to_f16(x);
        }
        float one[4] = {1, 1, 1, 1};
        KilnDevPtr x8 = up(q8, n), x16 = up(h16, n * 2), o = up(NULL, n * 2), lse = up(NULL, (size_t)B * H * N * 4);
        KilnDevPtr ds = up(one, 16);
        int64_t st[3] = {(int64_t)N * H * D, D, (int64_t)H * D};
        KilnAttentionParams a = {.dtype = KILN_E4M3, .out_dtype = KILN_F16, .batch = B, .heads_q = H, .heads_kv = H,
                                 .seqlen_q = N, .seqlen_k = N, .head_dim = D, .q = x8, .k = x8, .v = x8, .o = o,
                                 .lse = lse, .causal = causal, .q_descale = ds, .k_descale = ds, .v_descale = ds};
        memcpy(a.q_stride, st, sizeof st), memcpy(a.k_stride, st, sizeof st);
        memcpy(a.v_stride, st, sizeof st), memcpy(a.o_stride, st, sizeof st);
        double visible = causal ? (double)N * (N + 1) / 2 : (double)N * N;
        double flops = 4.0 * visible * D * B * H;
        a.schedule.no_fp8_wgmma = -1;   /* FP8 wgmma: opt-in until this run has checked it */
        double t8 = gu_attention_fwd_ms(g_dev, &a, 20, &g_fail);
        KilnAttentionParams w = a;
        w.schedule.no_fp8_wgmma = 1;   /* the dots widened to f16 (the path before FP8 wgmma) */
        double tw = gu_attention_fwd_ms(g_dev, &w, 20, &g_fail);
        KilnAttentionParams ov = a;
        ov.schedule.overlap = 1;   /* FlashAttention-3's overlap, off for FP8 by default (jit/attention.c) */
        double to = gu_attention_fwd_ms(g_dev, &ov, 20, &g_fail);
        KilnAttentionParams f = a;
        f.dtype = KILN_F16, f.q = f.k = f.v = x16;
        double t16 = gu_attention_fwd_ms(g_dev, &f, 20, &g_fail);
        printf("BENCH fp8 B%d H%d N%d d%d %s  e4m3 %.3f ms (%.0f TFLOP/s)  widened %.3f ms (%.0f TFLOP/s)  "
               "e4m3+overlap %.3f ms (%.0f TFLOP/s)  f16 %.3f ms (%.0f TFLOP/s)  fp8/widened %.2fx  fp8/f16 %.2fx\n",
               B, H, N, D, causal ? "causal" : "full  ", t8, flops / t8 * 1e-9, tw, flops / tw * 1e-9, to,
               flops / to * 1e-9, t16, flops / t16 * 1e-9, tw / t8, t16 / t8);
        KilnDevPtr bufs[] = {x8, x16, o, lse, ds};
        for (size_t i = 0; i < 5; i++) kiln_free(g_dev, bufs[i]);
        free(q8), free(h16);
    }
}

int main(void)
{
    KilnDeviceInfo info;
    int started = gu_begin(&g_dev, &info, "/tmp/kiln-attn-fp8-cache-XXXXXX");
    if (started >= 0) return started;
    if (info.sm_version < 89) {
        kiln_shutdown(g_dev);
        return tu_skip("the FP8 forward needs sm_89 or newer");
    }
    if (getenv("KILN_FP8_BENCH")) bench();
    else
        for (int widened = 0; widened < 2; widened++)
            for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
                run_case(&k_cases[i], 600 + (unsigned)i * 11, widened);
    return gu_end(g_dev, g_fail);
}
