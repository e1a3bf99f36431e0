/*
 * operator/optimizer_gpu.cu — the optimizer operators on a GPU: grid-stride maps over (n)
 * float32 elements calling the MXC__HD steps of operator/optimizer.h, as the CPU kernels
 * do, one kernel per row of its MXC__OPT_MAPS list plus lamb_update_phase2. The parameters
 * travel by value into the kernel; a (1) input (rescale_grad, r1, r2) stays on the device
 * and each thread reads it, so nothing waits for a copy; the states (aux) are updated in
 * place, even when the output's req is null; the output may be the weight (each element is
 * loaded before it is stored).
 */
#include "operator/op_gpu.cuh"

#include "operator/optimizer.h"

extern "C" {
#include "operator/cast.h"
}

typedef float (*opt_step_fn)(const struct mxc__opt_param *, float, float, float *);

/* The states' addresses, captured by value (a lambda may not capture a local type). */
struct opt_states {
    float *p[3];
};

/* weight, grad, out: (n); NST states (n), updated; SCALE >= 0: input SCALE is
 * rescale_grad (1). */
template <int NST, int SCALE, opt_step_fn STEP>
static int opt_map(const struct mxc__op_call *c, const char *what) {
    struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    mxc__opt_prepare(&p);
    const int req = c->req[0];
    const float *w = (const float *)c->in_data[0].data, *g = (const float *)c->in_data[1].data;
    const float *scale = SCALE >= 0 ? (const float *)c->in_data[SCALE].data : NULL;
    float *o = (float *)c->out_data[0].data;
    struct opt_states st = {{NULL, NULL, NULL}};
    for (int j = 0; j < NST; j++)
        st.p[j] = (float *)c->aux[j].data;
    return mxc__launch(c->out_data[0].size, c->rctx->stream, what, [=] __device__(int64_t i) {
        struct mxc__opt_param q = p;
        if (SCALE >= 0)
            q.rescale_grad = *scale;
        float s[3] = {0, 0, 0};
        for (int j = 0; j < NST; j++)
            s[j] = st.p[j][i];
        const float v = STEP(&q, w[i], g[i], s);
        for (int j = 0; j < NST; j++)
            st.p[j][i] = s[j];
        mxc__put(req, o, i, v);
    });
}

#define OPT_GPU_KERNEL(id, name, nst, step, scale)                 \
    extern "C" int mxc__##id##_gpu(const struct mxc__op_call *c) { \
        return opt_map<nst, scale, step>(c, name);                 \
    }
MXC__OPT_MAPS(OPT_GPU_KERNEL)
#undef OPT_GPU_KERNEL

/* weight, g, out: (n); r1, r2: (1), read on the device */
extern "C" int mxc__lamb_update_phase2_gpu(const struct mxc__op_call *c) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *w = (const float *)c->in_data[0].data, *g = (const float *)c->in_data[1].data;
    const float *r1 = (const float *)c->in_data[2].data, *r2 = (const float *)c->in_data[3].data;
    float *o = (float *)c->out_data[0].data;
    return mxc__launch(c->out_data[0].size, c->rctx->stream, "lamb_update_phase2",
                       [=] __device__(int64_t i) {
                           mxc__put(req, o, i, mxc__lamb2_step(&p, w[i], g[i], *r1, *r2));
                       });
}

/* The multi-precision steps: grad read in its dtype as float32, NST states then weight32
 * (float32) in aux, updated; out in the weight's dtype (operator/cast.h's load and store). */
template <int NST, opt_step_fn STEP>
static int mp_map(const struct mxc__op_call *c, const char *what) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const int req = c->req[0];
    const void *g = c->in_data[1].data;
    const int gt = c->in_data[1].dtype, ot = c->out_data[0].dtype;
    void *o = c->out_data[0].data;
    float *mom = NST ? (float *)c->aux[0].data : NULL, *w32 = (float *)c->aux[NST].data;
    return mxc__launch(c->out_data[0].size, c->rctx->stream, what, [=] __device__(int64_t i) {
        float s[1] = {NST ? mom[i] : 0.0f};
        const float w = STEP(&p, w32[i], mxc__elem_float(mxc__elem_load(g, gt, i)), s);
        if (NST)
            mom[i] = s[0];
        w32[i] = w;
        if (req != MXC__REQ_NULL)
            mxc__elem_store(o, ot, i, mxc__elem_of_float(w), req == MXC__REQ_ADD);
    });
}

#define MP_GPU_KERNEL(id, name, nst, step)                         \
    extern "C" int mxc__##id##_gpu(const struct mxc__op_call *c) { \
        return mp_map<nst, step>(c, name);                         \
    }
MXC__MP_MAPS(MP_GPU_KERNEL)
#undef MP_GPU_KERNEL
