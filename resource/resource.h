/*
 * resource/resource.h — per-device resources that operations request: temporary space
 * and random generators. Each copy owns an engine variable; an operation that uses one
 * lists it among the variables it writes, so two users of one copy never overlap and a
 * copy's memory can be grown inside the operation. Internal.
 */
#ifndef MXC_RESOURCE_H
#define MXC_RESOURCE_H

#include "mxc/engine.h"
#include "mxc/storage.h"

#include "resource/philox.h"

enum mxc__resource_kind {
    MXC__RES_TEMP = 0,   /* scratch memory, grown on demand */
    MXC__RES_RANDOM = 1, /* a Philox generator */
};

struct mxc__resource {
    int kind;
    mxc_context ctx;
    mxc_var *var;
    mxc_storage_block space; /* temp: the current buffer (empty until first use) */
    struct mxc__philox rng;  /* random: the generator state */
};

/* A copy of `kind` on `ctx`, handed out round-robin among the device's copies
 * (MXC_EXEC_NUM_TEMP temp copies, default 1; one generator per device). Resources live
 * on the default engine until exit. Returns MXC_OK, MXC_EINVAL, MXC_ENODEV, MXC_ENOMEM. */
int mxc__resource_get(mxc_context ctx, int kind, struct mxc__resource **out);

/* Temp space of at least `bytes`, valid until the operation holding the resource's
 * variable finishes. Call only from such an operation. MXC_ENOMEM on failure. */
int mxc__resource_temp(struct mxc__resource *r, size_t bytes, void **out);

#endif /* MXC_RESOURCE_H */
