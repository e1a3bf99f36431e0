/*
 * model/networks.c — the ready-made networks of mxc/networks.h, built through the public
 * symbol API like any user program would: one small helper applies an operator to an
 * input and names the node.
 */
#include "mxc/networks.h"

#include "common/common.h"

#include <stdio.h>
#include <string.h>

/* `*net` = op(*net) with `n` key/value parameters, named `name`; consumes the old *net.
 * On failure *net is freed and set to NULL. */
static int layer(mxc_symbol **net, const char *op, const char *name, int n, const char *const *kv) {
    const char *keys[8] = {NULL}, *vals[8] = {NULL};
    for (int i = 0; i < n; i++) {
        keys[i] = kv[2 * i];
        vals[i] = kv[2 * i + 1];
    }
    mxc_symbol *out = NULL;
    int rc = mxc_symbol_create(op, n, keys, vals, name, 1, NULL, net, &out);
    mxc_symbol_free(*net);
    *net = out;
    return rc;
}

#define LAYER(net, op, name, ...)                                                           \
    layer(net, op, name, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *) / 2), \
          (const char *[]){__VA_ARGS__})
#define LAYER0(net, op, name) layer(net, op, name, 0, NULL)

static int softmax_head(mxc_symbol **net, int num_classes, const char *fc_name) {
    char classes[16];
    snprintf(classes, sizeof classes, "%d", num_classes);
    int rc = LAYER(net, "FullyConnected", fc_name, "num_hidden", classes);
    return rc == MXC_OK ? LAYER0(net, "SoftmaxOutput", "softmax") : rc;
}

int mxc_net_mlp(int num_hidden, const int *hidden, const char *act_type, int num_classes,
                mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_net_mlp: out is NULL");
    *out = NULL;
    if (num_hidden < 0 || (num_hidden > 0 && hidden == NULL) || num_classes < 1 || act_type == NULL)
        return mxc__error(MXC_EINVAL, "mxc_net_mlp: bad layer sizes or activation");
    mxc_symbol *net = NULL;
    int rc = mxc_symbol_variable("data", &net);
    for (int i = 0; rc == MXC_OK && i < num_hidden; i++) {
        char fc[32], act[48], units[16];
        snprintf(fc, sizeof fc, "fc%d", i + 1);
        snprintf(act, sizeof act, "%s%d", act_type, i + 1);
        snprintf(units, sizeof units, "%d", hidden[i]);
        rc = hidden[i] > 0
                 ? LAYER(&net, "FullyConnected", fc, "num_hidden", units)
                 : mxc__error(MXC_EINVAL, "mxc_net_mlp: layer %d has %d units", i + 1, hidden[i]);
        if (rc == MXC_OK)
            rc = LAYER(&net, "Activation", act, "act_type", act_type);
    }
    if (rc == MXC_OK) {
        char fc[32];
        snprintf(fc, sizeof fc, "fc%d", num_hidden + 1);
        rc = softmax_head(&net, num_classes, fc);
    }
    if (rc != MXC_OK) {
        mxc_symbol_free(net);
        return rc;
    }
    *out = net;
    return MXC_OK;
}

int mxc_net_lenet(int num_classes, mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_net_lenet: out is NULL");
    *out = NULL;
    if (num_classes < 1)
        return mxc__error(MXC_EINVAL, "mxc_net_lenet: %d classes", num_classes);
    mxc_symbol *net = NULL;
    int rc = mxc_symbol_variable("data", &net);
    const char *const filters[2] = {"20", "50"};
    for (int i = 0; rc == MXC_OK && i < 2; i++) {
        char conv[16], act[16], pool[16];
        snprintf(conv, sizeof conv, "conv%d", i + 1);
        snprintf(act, sizeof act, "tanh%d", i + 1);
        snprintf(pool, sizeof pool, "pool%d", i + 1);
        rc = LAYER(&net, "Convolution", conv, "kernel", "(5, 5)", "num_filter", filters[i]);
        if (rc == MXC_OK)
            rc = LAYER(&net, "Activation", act, "act_type", "tanh");
        if (rc == MXC_OK)
            rc = LAYER(&net, "Pooling", pool, "pool_type", "max", "kernel", "(2, 2)", "stride",
                       "(2, 2)");
    }
    if (rc == MXC_OK)
        rc = LAYER0(&net, "Flatten", "flatten");
    if (rc == MXC_OK)
        rc = LAYER(&net, "FullyConnected", "fc1", "num_hidden", "500");
    if (rc == MXC_OK)
        rc = LAYER(&net, "Activation", "tanh3", "act_type", "tanh");
    if (rc == MXC_OK)
        rc = softmax_head(&net, num_classes, "fc2");
    if (rc != MXC_OK) {
        mxc_symbol_free(net);
        return rc;
    }
    *out = net;
    return MXC_OK;
}

/* conv (3x3 or 1x1, stride) + BatchNorm named <name>_conv / <name>_bn */
static int conv_bn(mxc_symbol **net, const char *name, int filters, int kernel, int stride) {
    char conv[64], bn[64], f[32], k[32], s[32], p[32];
    snprintf(conv, sizeof conv, "%s_conv", name);
    snprintf(bn, sizeof bn, "%s_bn", name);
    snprintf(f, sizeof f, "%d", filters);
    snprintf(k, sizeof k, "(%d, %d)", kernel, kernel);
    snprintf(s, sizeof s, "(%d, %d)", stride, stride);
    snprintf(p, sizeof p, "(%d, %d)", kernel / 2, kernel / 2);
    int rc = LAYER(net, "Convolution", conv, "kernel", k, "stride", s, "pad", p, "num_filter", f,
                   "no_bias", "True");
    return rc == MXC_OK ? LAYER(net, "BatchNorm", bn, "fix_gamma", "False") : rc;
}

/* One basic block: relu(bn(conv(relu(bn(conv(x))))) + shortcut(x)). Consumes *net. */
static int basic_block(mxc_symbol **net, const char *name, int filters, int stride, bool project) {
    char part[64];
    mxc_symbol *shortcut = NULL, *body = NULL, *sum = NULL;
    int rc = mxc_symbol_get_output(*net, 0, &body);
    if (rc == MXC_OK && project) {
        snprintf(part, sizeof part, "%s_sc", name);
        rc = mxc_symbol_get_output(*net, 0, &shortcut);
        if (rc == MXC_OK)
            rc = conv_bn(&shortcut, part, filters, 1, stride);
    } else if (rc == MXC_OK) {
        rc = mxc_symbol_get_output(*net, 0, &shortcut);
    }
    if (rc == MXC_OK) {
        snprintf(part, sizeof part, "%s_1", name);
        rc = conv_bn(&body, part, filters, 3, stride);
    }
    if (rc == MXC_OK) {
        snprintf(part, sizeof part, "%s_relu1", name);
        rc = LAYER(&body, "Activation", part, "act_type", "relu");
    }
    if (rc == MXC_OK) {
        snprintf(part, sizeof part, "%s_2", name);
        rc = conv_bn(&body, part, filters, 3, 1);
    }
    if (rc == MXC_OK) {
        snprintf(part, sizeof part, "%s_plus", name);
        mxc_symbol *ins[2] = {body, shortcut};
        rc = mxc_symbol_create("_plus", 0, NULL, NULL, part, 2, NULL, ins, &sum);
    }
    if (rc == MXC_OK) {
        snprintf(part, sizeof part, "%s_relu2", name);
        rc = LAYER(&sum, "Activation", part, "act_type", "relu");
    }
    mxc_symbol_free(body);
    mxc_symbol_free(shortcut);
    mxc_symbol_free(*net);
    *net = sum;
    return rc;
}

int mxc_net_resnet(int units_per_stage, int num_classes, mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_net_resnet: out is NULL");
    *out = NULL;
    if (units_per_stage < 1 || num_classes < 1)
        return mxc__error(MXC_EINVAL, "mxc_net_resnet: %d units per stage, %d classes",
                          units_per_stage, num_classes);
    mxc_symbol *net = NULL;
    int rc = mxc_symbol_variable("data", &net);
    if (rc == MXC_OK)
        rc = conv_bn(&net, "stem", 64, 3, 1);
    if (rc == MXC_OK)
        rc = LAYER(&net, "Activation", "stem_relu", "act_type", "relu");
    const int channels[4] = {64, 128, 256, 512};
    for (int s = 0; rc == MXC_OK && s < 4; s++)
        for (int u = 0; rc == MXC_OK && u < units_per_stage; u++) {
            char name[48];
            snprintf(name, sizeof name, "stage%d_unit%d", s + 1, u + 1);
            int stride = s > 0 && u == 0 ? 2 : 1;
            rc = basic_block(&net, name, channels[s], stride, s > 0 && u == 0);
        }
    if (rc == MXC_OK)
        rc = LAYER(&net, "Pooling", "pool", "pool_type", "avg", "global_pool", "True", "kernel",
                   "(1, 1)");
    if (rc == MXC_OK)
        rc = LAYER0(&net, "Flatten", "flatten");
    if (rc == MXC_OK)
        rc = softmax_head(&net, num_classes, "fc");
    if (rc != MXC_OK) {
        mxc_symbol_free(net);
        return rc;
    }
    *out = net;
    return MXC_OK;
}
