/*
 * bench/bench_memory.c — what the executor's memory plan saves on training graphs, and
 * whether the memory really in use stays within the plan.
 *
 *   mlp_train       MLP 784 - 1024 x 8 - 10 (relu), batch 64
 *   lenet_train     LeNet (mxc_net_lenet) on 1x28x28, batch 100
 *   resnet18_train  ResNet-18 layout (mxc_net_resnet, 2 units per stage) on 3x32x32,
 *                   batch 32
 *
 * For each: bind for training (gradients for every weight), run one training step
 * (forward + backward) to warm the storage pool, then measure a second step:
 *   naive_bytes    every intermediate array in its own block
 *   planned_bytes  the plan (in place + reuse of freed blocks)
 *   peak_bytes     the storage pool's peak bytes in use during the step, above what was
 *                  in use before it (arguments, gradients and outputs are allocated
 *                  before, so this is the planned memory plus operator temp space)
 * and the ratio planned / naive. The baseline is the naive plan itself, so
 * ratio_vs_baseline = naive / planned (above 1: the plan saves memory).
 *
 *   build/bin/bench_memory [--json]
 */
#include "bench_util.h"

#include "mxc/mxc.h"

#include <stdbool.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ != MXC_OK) {                                                             \
            fprintf(stderr, "%s: %s: %s\n", #call, mxc_err_name(rc_), mxc_last_error()); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

struct net_case {
    const char *name;
    mxc_shape data;
    int num_classes;
};

static mxc_symbol *build(int which) {
    mxc_symbol *s = NULL;
    if (which == 0) {
        int hidden[8] = {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024};
        CHECK(mxc_net_mlp(8, hidden, "relu", 10, &s));
    } else if (which == 1) {
        CHECK(mxc_net_lenet(10, &s));
    } else {
        CHECK(mxc_net_resnet(2, 10, &s));
    }
    return s;
}

static void measure(int which, const struct net_case *c, bool json) {
    mxc_symbol *sym = build(which);
    mxc_shape label = {1, {c->data.dims[0]}};
    const char *names[] = {"data", "softmax_label"};
    mxc_shape shapes[] = {c->data, label};
    mxc_executor *x = NULL;
    CHECK(mxc_executor_simple_bind(sym, mxc_cpu(), 2, names, shapes, MXC_GRAD_WRITE, &x));
    mxc_exec_plan_info info;
    CHECK(mxc_executor_plan_info(x, &info));
    uint64_t t0 = bench_now_ns();
    CHECK(mxc_executor_forward(x, 1));
    CHECK(mxc_executor_backward(x, 0, NULL));
    CHECK(mxc_nd_wait_all());
    uint64_t t1 = bench_now_ns();
    mxc_storage_stats before, after;
    CHECK(mxc_storage_reset_stats(mxc_cpu()));
    CHECK(mxc_storage_get_stats(mxc_cpu(), &before));
    CHECK(mxc_executor_forward(x, 1));
    CHECK(mxc_executor_backward(x, 0, NULL));
    CHECK(mxc_nd_wait_all());
    uint64_t t2 = bench_now_ns();
    CHECK(mxc_storage_get_stats(mxc_cpu(), &after));
    size_t peak = after.peak_bytes_in_use - before.bytes_in_use;
    double ratio = (double)info.planned_bytes / (double)info.naive_bytes;
    fprintf(json ? stderr : stdout,
            "%-16s naive %10.2f MiB  planned %10.2f MiB (%.1f%% of naive, %d blocks)  "
            "peak %10.2f MiB (%.1f%% of planned)  step %.1f ms (first %.1f ms)\n",
            c->name, info.naive_bytes / 1048576.0, info.planned_bytes / 1048576.0, 100 * ratio,
            info.num_blocks, peak / 1048576.0, 100.0 * (double)peak / (double)info.planned_bytes,
            (t2 - t1) / 1e6, (t1 - t0) / 1e6);
    if (json) {
        bench_json j;
        bench_json_begin(&j, "memory", c->name);
        bench_json_str(&j, "system", "mxc-executor");
        bench_json_num(&j, "naive_bytes", (double)info.naive_bytes);
        bench_json_num(&j, "planned_bytes", (double)info.planned_bytes);
        bench_json_num(&j, "peak_bytes", (double)peak);
        bench_json_num(&j, "planned_over_naive", ratio);
        bench_json_num(&j, "peak_over_planned", (double)peak / (double)info.planned_bytes);
        bench_json_str(&j, "baseline", "naive_plan");
        bench_json_num(&j, "ratio_vs_baseline", 1.0 / ratio);
        bench_json_print(&j, stdout);
    }
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}

int main(int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else {
            fprintf(stderr, "usage: %s [--json]\n", argv[0]);
            return 2;
        }
    }
    const struct net_case cases[] = {
        {"mlp_train", {2, {64, 784}}, 10},
        {"lenet_train", {4, {100, 1, 28, 28}}, 10},
        {"resnet18_train", {4, {32, 3, 32, 32}}, 10},
    };
    for (int i = 0; i < 3; i++)
        measure(i, &cases[i], json);
    return 0;
}
