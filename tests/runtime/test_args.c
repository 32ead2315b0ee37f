/* test_args.c — argument checking against signatures and PTX signature reading,
 * without a GPU (the "is it device memory?" question is answered by a fake). */
#include "testutil.h"

#include <string.h>

#include "kiln.h"
#include "rt_internal.h"

static KilnParam vec_params[4];
static KilnKernelInfo vec_add;

static void setup(void)
{
    memset(vec_params, 0, sizeof vec_params);
    const char *names[] = {"X", "Y", "Z", "n"};
    for (int i = 0; i < 4; i++) {
        strcpy(vec_params[i].name, names[i]);
        vec_params[i].kind = i < 3 ? KILN_PARAM_PTR : KILN_PARAM_I32;
        vec_params[i].pointee_bits = i < 3 ? 32 : 0;
    }
    memset(&vec_add, 0, sizeof vec_add);
    strcpy(vec_add.name, "vec_add");
    vec_add.params = vec_params;
    vec_add.nparams = 4;
    vec_add.num_warps = 4;
}

/* Fake device memory: [0x7000_0000, 0x7100_0000) is device, [0x7200_0000, ...) pinned host. */
static int classify_calls;
static RtPtrClass fake_classify(KilnDevPtr p, void *ctx)
{
    (void)ctx;
    classify_calls++;
    if (p >= 0x70000000u && p < 0x71000000u) return RT_PTR_DEVICE;
    if (p >= 0x72000000u && p < 0x73000000u) return RT_PTR_HOST_MAPPED;
    return RT_PTR_UNKNOWN;
}

START_TEST(good_arguments_pass)
{
    KilnArg a[4] = {kiln_arg_ptr(0x70000000u), kiln_arg_ptr(0x70001000u), kiln_arg_ptr(0x72000000u),
                    kiln_arg_i32(1000)};
    classify_calls = 0;
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 4, fake_classify, NULL), KILN_OK);
    ck_assert_int_eq(classify_calls, 3);
}
END_TEST

START_TEST(wrong_count)
{
    KilnArg a[3] = {kiln_arg_ptr(0x70000000u), kiln_arg_ptr(0x70001000u), kiln_arg_ptr(0x70002000u)};
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 3, fake_classify, NULL), KILN_ERR_ARGS);
    ck_assert_msg(!strncmp(kiln_last_error(), "kernel vec_add takes 4 arguments, got 3", 39), "%s", kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), "vec_add(X: *(32-bit elements), Y: "), "%s", kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), "n: i32)"), "%s", kiln_last_error());
    vec_add.nparams = 1;
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 3, NULL, NULL), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "takes 1 argument, got 3"), "%s", kiln_last_error());
}
END_TEST

START_TEST(wrong_kind_names_the_parameter)
{
    KilnArg a[4] = {kiln_arg_ptr(0x70000000u), kiln_arg_ptr(0x70001000u), kiln_arg_ptr(0x70002000u),
                    kiln_arg_f32(1000.0f)};
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 4, fake_classify, NULL), KILN_ERR_ARGS);
    ck_assert_str_eq(kiln_last_error(), "kernel vec_add: argument 4 (n) must be i32, got f32 (kiln_arg_f32)");
    a[3] = kiln_arg_i64(1000);
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 4, fake_classify, NULL), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "argument 4 (n) must be i32, got i64"), "%s", kiln_last_error());
    a[3] = kiln_arg_i32(5);
    a[1] = kiln_arg_i64(0x70001000);
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 4, fake_classify, NULL), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "argument 2 (Y) must be *(32-bit elements), got i64"), "%s",
                  kiln_last_error());
}
END_TEST

START_TEST(host_pointer_is_refused)
{
    float host[16];
    KilnArg a[4] = {kiln_arg_ptr(0x70000000u), kiln_arg_ptr((KilnDevPtr)(uintptr_t)host),
                    kiln_arg_ptr(0x70002000u), kiln_arg_i32(16)};
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 4, fake_classify, NULL), KILN_ERR_ARGS);
    ck_assert_msg(!strncmp(kiln_last_error(), "kernel vec_add: argument 2 (Y) is a host pointer (0x", 52), "%s",
                  kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), "kiln_malloc"), "%s", kiln_last_error());
    a[1] = kiln_arg_ptr(0);
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 4, fake_classify, NULL), KILN_ERR_ARGS);
    ck_assert_str_eq(kiln_last_error(), "kernel vec_add: argument 2 (Y) is a null pointer");
    /* no classifier: the pointer check is skipped (the kind check still runs) */
    a[1] = kiln_arg_ptr((KilnDevPtr)(uintptr_t)host);
    ck_assert_int_eq(rt_check_args(&vec_add, false, a, 4, NULL, NULL), KILN_OK);
}
END_TEST

START_TEST(every_kind_matches_itself_only)
{
    KilnParam p;
    memset(&p, 0, sizeof p);
    strcpy(p.name, "v");
    KilnKernelInfo ki;
    memset(&ki, 0, sizeof ki);
    strcpy(ki.name, "k");
    ki.params = &p;
    ki.nparams = 1;
    KilnArg all[] = {kiln_arg_ptr(0x70000000u), kiln_arg_i32(1), kiln_arg_i64(1), kiln_arg_f32(1),
                     kiln_arg_f64(1), kiln_arg_bool(1), kiln_arg_i8(1), kiln_arg_i16(1), kiln_arg_u8(1),
                     kiln_arg_u16(1), kiln_arg_u32(1), kiln_arg_u64(1), kiln_arg_f16_bits(0x3c00),
                     kiln_arg_bf16_bits(0x3f80)};
    int n = (int)(sizeof all / sizeof all[0]);
    ck_assert_int_eq(n, KILN_PARAM_BF16 + 1);
    for (int pk = 0; pk < n; pk++) {
        p.kind = (KilnParamKind)pk;
        for (int ak = 0; ak < n; ak++) {
            KilnStatus st = rt_check_args(&ki, false, &all[ak], 1, fake_classify, NULL);
            ck_assert_msg((st == KILN_OK) == (all[ak].kind == p.kind), "param %s arg %s: %s",
                          rt_param_kind_name(p.kind), rt_param_kind_name(all[ak].kind), kiln_last_error());
        }
    }
}
END_TEST

START_TEST(loose_signatures_match_by_size)
{
    KilnParam p[3];
    memset(p, 0, sizeof p);
    strcpy(p[0].name, "param_0");
    p[0].kind = KILN_PARAM_U64;
    strcpy(p[1].name, "param_1");
    p[1].kind = KILN_PARAM_I32;
    strcpy(p[2].name, "param_2");
    p[2].kind = KILN_PARAM_F32;
    KilnKernelInfo ki;
    memset(&ki, 0, sizeof ki);
    strcpy(ki.name, "k");
    ki.params = p;
    ki.nparams = 3;
    KilnArg a[3] = {kiln_arg_ptr(0x70000000u), kiln_arg_u32(7), kiln_arg_f32(1.5f)};
    ck_assert_int_eq(rt_check_args(&ki, true, a, 3, fake_classify, NULL), KILN_OK);
    a[0] = kiln_arg_i64(-1); /* a 64-bit integer is fine for .u64 */
    ck_assert_int_eq(rt_check_args(&ki, true, a, 3, fake_classify, NULL), KILN_OK);
    a[0] = kiln_arg_ptr(0x1234); /* but a pointer is still checked */
    ck_assert_int_eq(rt_check_args(&ki, true, a, 3, fake_classify, NULL), KILN_ERR_ARGS);
    a[0] = kiln_arg_f64(1.0);
    ck_assert_int_eq(rt_check_args(&ki, true, a, 3, fake_classify, NULL), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "argument 1 (param_0) must be u64 (by size, from the PTX), got f64"), "%s",
                  kiln_last_error());
    a[0] = kiln_arg_u64(3);
    a[1] = kiln_arg_i64(7);
    ck_assert_int_eq(rt_check_args(&ki, true, a, 3, fake_classify, NULL), KILN_ERR_ARGS);
    a[1] = kiln_arg_i32(7);
    a[2] = kiln_arg_i32(1);
    ck_assert_int_eq(rt_check_args(&ki, true, a, 3, fake_classify, NULL), KILN_ERR_ARGS);
}
END_TEST

START_TEST(bad_calls)
{
    ck_assert_int_eq(rt_check_args(NULL, false, NULL, 0, NULL, NULL), KILN_ERR_USAGE);
    ck_assert_int_eq(rt_check_args(&vec_add, false, NULL, 4, NULL, NULL), KILN_ERR_USAGE);
    ck_assert_int_eq(rt_check_args(&vec_add, false, NULL, 0, NULL, NULL), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "takes 4 arguments, got 0"), "%s", kiln_last_error());
}
END_TEST

/* PTX as LLVM's NVPTX backend writes it, plus a declaration and comments. */
static const char *llvm_ptx =
    "//\n// Generated by LLVM NVPTX Back-End\n//\n.version 8.0\n.target sm_90a\n.address_size 64\n"
    ".extern .func helper(.param .b32 x);\n"
    "\t// .globl\tvec_add\n"
    ".visible .entry vec_add(\n"
    "\t.param .u64 .ptr .global .align 4 vec_add_param_0,\n"
    "\t.param .u64 vec_add_param_1,\n"
    "\t.param .u64 vec_add_param_2,\n"
    "\t.param .u32 vec_add_param_3\n"
    ")\n.maxntid 256, 1, 1\n{\n\t.reg .b32 %r<5>;\n\tret;\n}\n"
    "/* .entry not_this_one( */\n"
    ".visible .entry scale(.param .f32 scale_param_0, .param .f64 scale_param_1, .param .b16 h, "
    ".param .u8 flag)\n.reqntid 64, 2, 1\n{\n\tret;\n}\n"
    ".visible .entry noargs()\n{\n\tret;\n}\n"
    ".extern .entry external_only(.param .u32 a);\n";

START_TEST(ptx_signatures)
{
    KilnKernelInfo *ki = NULL;
    int n = -1;
    ck_assert_int_eq(rt_ptx_signatures(llvm_ptx, &ki, &n), KILN_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(ki[0].name, "vec_add");
    ck_assert_int_eq(ki[0].nparams, 4);
    ck_assert_int_eq(ki[0].num_warps, 8);
    ck_assert_str_eq(ki[0].params[0].name, "param_0");
    ck_assert_int_eq(ki[0].params[0].kind, KILN_PARAM_PTR);
    ck_assert_int_eq(ki[0].params[1].kind, KILN_PARAM_U64);
    ck_assert_int_eq(ki[0].params[3].kind, KILN_PARAM_I32);
    ck_assert_str_eq(ki[0].params[3].name, "param_3");
    ck_assert_str_eq(ki[1].name, "scale");
    ck_assert_int_eq(ki[1].nparams, 4);
    ck_assert_int_eq(ki[1].num_warps, 4);
    ck_assert_int_eq(ki[1].params[0].kind, KILN_PARAM_F32);
    ck_assert_int_eq(ki[1].params[1].kind, KILN_PARAM_F64);
    ck_assert_int_eq(ki[1].params[2].kind, KILN_PARAM_U16);
    ck_assert_str_eq(ki[1].params[2].name, "h");
    ck_assert_int_eq(ki[1].params[3].kind, KILN_PARAM_U8);
    ck_assert_str_eq(ki[2].name, "noargs");
    ck_assert_int_eq(ki[2].nparams, 0);
    ck_assert_int_eq(ki[2].num_warps, 4);

    KilnKernelInfo *copy = NULL;
    ck_assert_int_eq(rt_copy_infos(ki, n, &copy), KILN_OK);
    ck_assert_ptr_ne(copy[0].params, ki[0].params);
    ck_assert_str_eq(copy[0].params[2].name, "param_2");
    rt_free_infos(ki, n);
    rt_free_infos(copy, n);
}
END_TEST

START_TEST(ptx_that_cannot_be_read)
{
    KilnKernelInfo *ki = NULL;
    int n = 0;
    ck_assert_int_eq(rt_ptx_signatures(".entry k(.param .align 8 .b8 k_param_0[16])\n{ ret; }", &ki, &n),
                     KILN_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(kiln_last_error(), "aggregate"), "%s", kiln_last_error());
    /* small byte arrays (__half, __nv_bfloat16) are read by size */
    ck_assert_int_eq(rt_ptx_signatures(".entry h(.param .align 2 .b8 h_param_0[2], .param .b8 h_param_1[8])\n{ ret; }",
                                       &ki, &n), KILN_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(ki[0].params[0].kind, KILN_PARAM_U16);
    ck_assert_int_eq(ki[0].params[1].kind, KILN_PARAM_U64);
    rt_free_infos(ki, n);
    ck_assert_int_eq(rt_ptx_signatures(".entry k(.param .b8 k_param_0[3])\n{ ret; }", &ki, &n), KILN_ERR_UNSUPPORTED);
    ck_assert_int_eq(rt_ptx_signatures(".entry k(.param .u32", &ki, &n), KILN_ERR_USAGE);
    ck_assert_int_eq(rt_ptx_signatures(".entry", &ki, &n), KILN_ERR_USAGE);
    ck_assert_int_eq(rt_ptx_signatures(".entry k .param", &ki, &n), KILN_ERR_USAGE);
    ck_assert_int_eq(rt_ptx_signatures("no entries at all", &ki, &n), KILN_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(ki);
}
END_TEST

START_TEST(param_sizes)
{
    ck_assert_int_eq(rt_param_kind_bytes(KILN_PARAM_PTR), 8);
    ck_assert_int_eq(rt_param_kind_bytes(KILN_PARAM_I32), 4);
    ck_assert_int_eq(rt_param_kind_bytes(KILN_PARAM_BF16), 2);
    ck_assert_int_eq(rt_param_kind_bytes(KILN_PARAM_I1), 1);
    ck_assert_str_eq(rt_param_kind_name(KILN_PARAM_I1), "bool");
    ck_assert_str_eq(rt_param_kind_name((KilnParamKind)77), "?");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_args");
    TCase *tc = tcase_create("args");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, good_arguments_pass);
    tcase_add_test(tc, wrong_count);
    tcase_add_test(tc, wrong_kind_names_the_parameter);
    tcase_add_test(tc, host_pointer_is_refused);
    tcase_add_test(tc, every_kind_matches_itself_only);
    tcase_add_test(tc, loose_signatures_match_by_size);
    tcase_add_test(tc, bad_calls);
    tcase_add_test(tc, ptx_signatures);
    tcase_add_test(tc, ptx_that_cannot_be_read);
    tcase_add_test(tc, param_sizes);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
