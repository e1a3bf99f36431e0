/*
 * tests/util/op_ref.c — the helpers of tests/util/op_ref.h.
 */
#include "tests/util/op_ref.h"

#include "mxc/op.h"
#include "operator/op.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

struct mxct_params mxct_kv_split(const char *const *kv, const char **keys, const char **vals,
                                 int max) {
    int n = 0;
    for (; kv[2 * n]; n++) {
        ck_assert_msg(n < max, "more than %d parameters", max);
        keys[n] = kv[2 * n];
        vals[n] = kv[2 * n + 1];
    }
    return (struct mxct_params){n, keys, vals};
}

void mxct_ref_load_all(const char *file, const char *prefix, int n, struct mxct_tensor *t) {
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s%d", prefix, i);
        t[i] = mxct_ref_load(file, name);
    }
}

int mxct_op_infer(const char *op, struct mxct_params kv, mxc_shape *in, int num_in, mxc_shape *out,
                  int num_out) {
    const struct mxc__op_def *d = mxc__op_find(op);
    ck_assert_msg(d != NULL, "%s is not registered", op);
    _Alignas(16) unsigned char params[1024];
    ck_assert_uint_le(d->param_size, sizeof params);
    int rc = mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params);
    if (rc != MXC_OK)
        return rc;
    ck_assert_int_eq(mxc__op_num_inputs(d, params, NULL), num_in);
    ck_assert_int_eq(mxc__op_num_outputs(d, params, NULL), num_out);
    return d->infer_shape(params, in, num_in, out, num_out, NULL, 0);
}

void mxct_expect_default(const char *op, const char *key, const char *want) {
    mxc_op_info info;
    ck_assert_int_eq(mxc_op_get_info(op, &info), MXC_OK);
    for (int i = 0; i < info.num_params; i++)
        if (strcmp(info.params[i].name, key) == 0) {
            ck_assert_msg(info.params[i].default_value != NULL, "%s.%s is required", op, key);
            ck_assert_str_eq(info.params[i].default_value, want);
            return;
        }
    ck_abort_msg("%s has no parameter %s", op, key);
}
