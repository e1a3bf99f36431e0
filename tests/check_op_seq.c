/*
 * tests/check_op_seq.c — SequenceMask, SequenceLast, SequenceReverse (operator/sequence.c)
 * and the legacy Crop (operator/crop.c). Outputs (their shapes are the shape-inference
 * reference) and data gradients against MXNet 1.9.1 references (tests/data/ops/seq, made by
 * scripts/gen_op_refs_seq.py), with lengths at MXNet's edges (fractions, 0, -0.5, past the
 * steps); finite-difference gradient checks with write and add-to requests, and the
 * in-place runs the harness adds (SequenceMask); zero gradients for sequence_length and
 * crop_like; parameter defaults; bad parameters, shapes and lengths as error codes with
 * messages; runs through mxc_imperative_invoke and the engine.
 */
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- Reference cases (parameters as in scripts/gen_op_refs_seq.py) ------------------- */

struct ref_case {
    const char *file; /* tests/data/ops/seq/<file>.params */
    const char *op;
    int num_in;
    int num_grad; /* inputs with MXNet gradients (0: MXNet's backward is broken there) */
    const char *kv[10];
};

#define LEN "use_sequence_length", "True"

static const struct ref_case ref_cases[] = {
    {"mask_nolen", "SequenceMask", 1, 1, {"value", "3"}},
    {"mask_len", "SequenceMask", 2, 1, {LEN, "value", "-1"}},
    {"mask_axis1", "SequenceMask", 2, 1, {LEN, "axis", "1", "value", "0.5"}},
    {"mask_2d", "SequenceMask", 2, 1, {LEN}},
    {"last_nolen", "SequenceLast", 1, 0, {NULL}},
    {"last_len", "SequenceLast", 2, 1, {LEN}},
    {"last_axis1", "SequenceLast", 2, 1, {LEN, "axis", "1"}},
    {"last_axis1_nolen", "SequenceLast", 1, 0, {"axis", "1"}},
    {"last_2d", "SequenceLast", 2, 1, {LEN}},
    {"reverse_nolen", "SequenceReverse", 1, 1, {NULL}},
    {"reverse_len", "SequenceReverse", 2, 1, {LEN}},
    {"reverse_4d", "SequenceReverse", 2, 1, {LEN}},
    {"reverse_2d", "SequenceReverse", 2, 1, {LEN}},
    {"crop_hw", "Crop", 1, 1, {"num_args", "1", "h_w", "(2, 3)", "offset", "(1, 2)"}},
    {"crop_corner", "Crop", 1, 1, {"num_args", "1", "h_w", "(2, 3)", "offset", "(3, 3)"}},
    {"crop_center", "Crop", 1, 1, {"num_args", "1", "h_w", "(4, 3)", "center_crop", "True"}},
    {"crop_like", "Crop", 2, 2, {"num_args", "2", "offset", "(1, 0)"}},
    {"crop_like_center", "Crop", 2, 2, {"num_args", "2", "center_crop", "True"}},
};

/* The output: shape and values (data movement: exact). */
/* The case as the reference helpers take it: the inputs past num_grad (the lengths) get
 * zero gradients. */
static struct mxct_ref_case ref_of(const struct ref_case *c) {
    struct mxct_ref_case r = mxct_ref_case_of("seq", c->file, c->op, c->kv, c->num_in, 1);
    r.grad_zero = ((1u << c->num_in) - 1) & ~((1u << c->num_grad) - 1);
    return r;
}

START_TEST(test_forward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_forward(&r, true, 0, 0);
}
END_TEST

START_TEST(test_backward_reference) {
    const struct ref_case *c = &ref_cases[_i];
    if (c->num_grad == 0)
        return; /* MXNet's backward is broken there: test_gradients checks it */
    struct mxct_ref_case r = ref_of(c);
    mxct_ref_expect_backward(&r, 0, 0);
}
END_TEST

/* ---- Finite differences ------------------------------------------------------------- */

struct grad_case {
    const char *op;
    int num_in;
    mxc_shape shapes[2];
    float lengths[4]; /* sequence_length, when num_in is 2 and the op is a Sequence* */
    const char *kv[10];
};

static const struct grad_case grad_cases[] = {
    {"SequenceMask", 1, {SHAPE(3, 2, 2)}, {0}, {"value", "2"}},
    {"SequenceMask", 2, {SHAPE(4, 3, 2), SHAPE(3)}, {2, 0, 3.5f}, {LEN}},
    {"SequenceMask", 2, {SHAPE(3, 4, 1, 2), SHAPE(3)}, {4, 1, 2}, {LEN, "axis", "1"}},
    {"SequenceLast", 1, {SHAPE(3, 2, 2)}, {0}, {NULL}},
    {"SequenceLast", 1, {SHAPE(2, 3, 2)}, {0}, {"axis", "1"}},
    {"SequenceLast", 2, {SHAPE(4, 3, 2), SHAPE(3)}, {1, 4, 2.5f}, {LEN}},
    {"SequenceLast", 2, {SHAPE(2, 5, 3), SHAPE(2)}, {3, 5}, {LEN, "axis", "1"}},
    {"SequenceReverse", 1, {SHAPE(3, 2, 2)}, {0}, {NULL}},
    {"SequenceReverse", 2, {SHAPE(5, 3, 2), SHAPE(3)}, {5, 0, 2.5f}, {LEN}},
    {"Crop", 1, {SHAPE(2, 2, 4, 5)}, {0}, {"num_args", "1", "h_w", "(2, 3)", "offset", "(1, 1)"}},
    {"Crop", 1, {SHAPE(1, 2, 5, 4)}, {0}, {"num_args", "1", "h_w", "(2, 2)", "center_crop", "1"}},
    {"Crop", 2, {SHAPE(2, 1, 4, 4), SHAPE(1, 3, 3, 2)}, {0}, {"num_args", "2", "offset", "(1, 2)"}},
};

START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    const char *keys[5], *vals[5];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, 5);
    struct mxct_tensor in[2];
    const bool lengths = c->num_in == 2 && strncmp(c->op, "Sequence", 8) == 0;
    in[0] = mxct_tensor_random(c->shapes[0], -1, 1, 30u);
    if (c->num_in == 2)
        in[1] = lengths ? mxct_tensor_from(c->shapes[1], c->lengths)
                        : mxct_tensor_random(c->shapes[1], -1, 1, 31u);
    /* sequence_length is not differentiable; crop_like's zero gradient is checked too */
    mxct_op_gradcheck(c->op, kv, true, in, c->num_in, NULL, lengths ? 2u : 0u, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* ---- Parameters, shapes and lengths --------------------------------------------------- */

START_TEST(test_params) {
    mxct_expect_default("SequenceMask", "use_sequence_length", "False");
    mxct_expect_default("SequenceMask", "value", "0");
    mxct_expect_default("SequenceMask", "axis", "0");
    mxct_expect_default("SequenceLast", "use_sequence_length", "False");
    mxct_expect_default("SequenceLast", "axis", "0");
    mxct_expect_default("SequenceReverse", "use_sequence_length", "False");
    mxct_expect_default("SequenceReverse", "axis", "0");
    mxct_expect_default("Crop", "offset", "(0, 0)");
    mxct_expect_default("Crop", "h_w", "(0, 0)");
    mxct_expect_default("Crop", "center_crop", "False");
    /* Crop and crop are two operators: MXNet's legacy Crop, and slice under its alias */
    ck_assert_str_eq(mxc__op_find("Crop")->name, "Crop");
    ck_assert_str_eq(mxc__op_find("crop")->name, "slice");
    /* sequence_length is an input only with use_sequence_length=True */
    const char *names[4];
    const struct mxc__op_def *d = mxc__op_find("SequenceMask");
    _Alignas(16) unsigned char params[256];
    ck_assert_int_eq(mxc__op_parse_params(d, 0, NULL, NULL, params), MXC_OK);
    ck_assert_int_eq(mxc__op_num_inputs(d, params, names), 1);
    ck_assert_str_eq(names[0], "data");
    const char *const k[] = {"use_sequence_length"}, *const v[] = {"True"};
    ck_assert_int_eq(mxc__op_parse_params(d, 1, k, v, params), MXC_OK);
    ck_assert_int_eq(mxc__op_num_inputs(d, params, names), 2);
    ck_assert_str_eq(names[1], "sequence_length");
    d = mxc__op_find("Crop");
    const char *const kc[] = {"num_args"}, *const vc[] = {"2"};
    ck_assert_int_eq(mxc__op_parse_params(d, 1, kc, vc, params), MXC_OK);
    ck_assert_int_eq(mxc__op_num_inputs(d, params, names), 2);
    ck_assert_str_eq(names[0], "arg0");
    ck_assert_str_eq(names[1], "arg1");
}
END_TEST

/* Runs `op` forward on data of shape `s` (and lengths `len` of shape `ls` when ls.ndim)
 * and expects an error. */
static void expect_forward_error(const char *op, struct mxct_params kv, mxc_shape s, mxc_shape ls,
                                 const float *len, int code, const char *const *needles) {
    struct mxct_tensor in[2], out[1] = {{{0}, NULL}};
    in[0] = mxct_tensor_random(s, -1, 1, 5u);
    int n = 1;
    if (ls.ndim)
        in[n++] = len ? mxct_tensor_from(ls, len) : mxct_tensor_random(ls, -1, 1, 6u);
    mxct_expect_error(mxct_op_forward(op, kv, true, in, n, NULL, out), code, needles);
    mxct_tensors_free(out, 1); /* made before a kernel that failed (a length), else none */
    mxct_tensors_free(in, n);
}

#define NONE ((mxc_shape){0})

START_TEST(test_bad_params) {
    const mxc_shape x = SHAPE(4, 3, 2), b3 = SHAPE(3);
    expect_forward_error("SequenceMask", MXCT_KV("axis", "2"), x, NONE, NULL, MXC_EINVAL,
                         MXCT_NEEDLES("SequenceMask", "axis"));
    expect_forward_error("SequenceReverse", MXCT_KV("axis", "1"), x, NONE, NULL, MXC_EINVAL,
                         MXCT_NEEDLES("SequenceReverse", "axis"));
    expect_forward_error("SequenceLast", MXCT_KV("use_sequence_length", "maybe"), x, NONE, NULL,
                         MXC_EINVAL, MXCT_NEEDLES("use_sequence_length"));
    expect_forward_error("SequenceLast", MXCT_NO_PARAMS, SHAPE(4), NONE, NULL, MXC_EINVAL,
                         MXCT_NEEDLES("SequenceLast", "2 axes or more", "(4)"));
    expect_forward_error("SequenceLast", MXCT_NO_PARAMS, SHAPE(0, 3), NONE, NULL, MXC_EINVAL,
                         MXCT_NEEDLES("SequenceLast", "no steps", "(0, 3)"));
    expect_forward_error("SequenceMask", MXCT_KV(LEN), x, SHAPE(2), NULL, MXC_ESHAPE,
                         MXCT_NEEDLES("SequenceMask", "sequence_length", "(2)", "(3)"));
    expect_forward_error("SequenceMask", MXCT_KV(LEN, "axis", "1"), x, b3, NULL, MXC_ESHAPE,
                         MXCT_NEEDLES("sequence_length", "(3)", "(4)"));
    expect_forward_error("SequenceMask", MXCT_KV(LEN), x, b3, (const float[]){1, -1, 2}, MXC_EINVAL,
                         MXCT_NEEDLES("SequenceMask", "sequence_length[1] = -1", "0 or more"));
    expect_forward_error("SequenceMask", MXCT_KV(LEN), x, b3, (const float[]){1, 2, NAN},
                         MXC_EINVAL, MXCT_NEEDLES("SequenceMask", "sequence_length[2] = nan"));
    expect_forward_error("SequenceReverse", MXCT_KV(LEN), x, b3, (const float[]){5, 1, 2},
                         MXC_EINVAL,
                         MXCT_NEEDLES("SequenceReverse", "sequence_length[0] = 5", "0 to the 4"));
    expect_forward_error("SequenceReverse", MXCT_KV(LEN), x, b3, (const float[]){4, 1, -1.5f},
                         MXC_EINVAL, MXCT_NEEDLES("sequence_length[2] = -1.5"));
    expect_forward_error("SequenceLast", MXCT_KV(LEN), x, b3, (const float[]){1, 0.5f, 2},
                         MXC_EINVAL,
                         MXCT_NEEDLES("SequenceLast", "sequence_length[1] = 0.5", "1 to the 4"));
    expect_forward_error("SequenceLast", MXCT_KV(LEN, "axis", "1"), SHAPE(3, 4), b3,
                         (const float[]){4, 5, 4}, MXC_EINVAL,
                         MXCT_NEEDLES("sequence_length[1] = 5", "1 to the 4", "axis 1"));

    const mxc_shape img = SHAPE(2, 3, 5, 6);
    expect_forward_error("Crop", MXCT_KV("h_w", "(2, 2)"), img, NONE, NULL, MXC_EINVAL,
                         MXCT_NEEDLES("Crop", "num_args"));
    expect_forward_error("Crop", MXCT_KV("num_args", "3"), img, NONE, NULL, MXC_EINVAL,
                         MXCT_NEEDLES("Crop", "num_args"));
    expect_forward_error("Crop", MXCT_KV("num_args", "1"), img, NONE, NULL, MXC_EINVAL,
                         MXCT_NEEDLES("Crop", "h_w (0, 0)", "at least 1"));
    expect_forward_error("Crop", MXCT_KV("num_args", "1", "h_w", "(6, 2)"), img, NONE, NULL,
                         MXC_EINVAL, MXCT_NEEDLES("Crop", "6 x 2", "larger", "(2, 3, 5, 6)"));
    expect_forward_error("Crop", MXCT_KV("num_args", "1", "h_w", "(2, 3)", "offset", "(4, 0)"), img,
                         NONE, NULL, MXC_EINVAL,
                         MXCT_NEEDLES("Crop", "2 x 3 at offset (4, 0)", "does not fit"));
    expect_forward_error("Crop", MXCT_KV("num_args", "1", "h_w", "(2, 3)", "offset", "(-1, 0)"),
                         img, NONE, NULL, MXC_EINVAL, MXCT_NEEDLES("Crop", "offset (-1, 0)"));
    expect_forward_error("Crop", MXCT_KV("num_args", "1", "h_w", "(2, 3)", "offset", "(1, 1, 1)"),
                         img, NONE, NULL, MXC_EINVAL, MXCT_NEEDLES("Crop", "offset (1, 1, 1)"));
    expect_forward_error("Crop", MXCT_KV("num_args", "1", "h_w", "(1, 1)"), SHAPE(3, 5, 6), NONE,
                         NULL, MXC_EINVAL, MXCT_NEEDLES("Crop", "data", "4-D", "(3, 5, 6)"));
    expect_forward_error("Crop", MXCT_KV("num_args", "2"), img, SHAPE(1, 1, 3, 7), NULL, MXC_EINVAL,
                         MXCT_NEEDLES("Crop", "3 x 7", "larger"));
    expect_forward_error("Crop", MXCT_KV("num_args", "2"), img, SHAPE(3, 3), NULL, MXC_EINVAL,
                         MXCT_NEEDLES("Crop", "crop_like", "4-D", "(3, 3)"));
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* Each reference case with two inputs through mxc_imperative_invoke. */
START_TEST(test_invoke) {
    const struct ref_case *c = &ref_cases[_i];
    if (c->num_in != 2)
        return;
    struct mxct_ref_case r = ref_of(c);
    mxct_ref_expect_invoke(&r, NULL, true, 0, 0);
}
END_TEST

/* A length the kernel refuses surfaces, with its message, at the wait on the output. */
START_TEST(test_invoke_bad_length) {
    struct mxct_tensor x = mxct_tensor_random(SHAPE(4, 2, 3), -1, 1, 7u);
    struct mxct_tensor len = mxct_tensor_from(SHAPE(2), (const float[]){2, 0});
    mxc_ndarray *arrays[2] = {mxct_array_of(&x), mxct_array_of(&len)}, *out = NULL;
    const char *const k[] = {"use_sequence_length"}, *const v[] = {"True"};
    CK_OK(mxc_imperative_invoke("SequenceLast", 1, k, v, 2, arrays, 1, &out, 0));
    CK_ERR_HAS(mxc_nd_wait_to_read(out), MXC_EINVAL, "SequenceLast", "sequence_length[1] = 0");
    mxc_nd_free(out);
    mxc_nd_free(arrays[0]);
    mxc_nd_free(arrays[1]);
    mxc_nd_wait_all();
    mxct_tensors_free(&x, 1);
    mxct_tensors_free(&len, 1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_seq");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_forward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_backward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("params");
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_bad_params);
    tcase_add_loop_test(tc, test_invoke, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_test(tc, test_invoke_bad_length);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
