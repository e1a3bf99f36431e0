/*
 * kvstore/kvstore_impl.h — what the store (kvstore.c) needs from a communicator across
 * processes (dist_mpi.c over MPI). The store sums the values of a key in its process,
 * then asks the communicator to sum that buffer across processes inside an asynchronous
 * engine operation, so no engine worker blocks on the network. Internal.
 */
#ifndef MXC_KVSTORE_IMPL_H
#define MXC_KVSTORE_IMPL_H

#include "common/common.h"
#include "mxc/engine.h"
#include "mxc/kvstore.h"

struct mxc__kv_comm;

/* A communicator. Functions other than allreduce are called from the store's (user's)
 * thread; allreduce from an engine operation. */
struct mxc__kv_comm_ops {
    /* Checks, collectively, that every process initialises the same keys with the same
     * shapes (shapes[i] for keys[i]): MXC_OK everywhere, or MXC_EINVAL everywhere with a
     * message naming the first key that differs and the shapes (or key sets) seen. */
    int (*check_keys)(struct mxc__kv_comm *c, int num, const int *keys, const mxc_shape *shapes);
    /* Replaces `n` floats at host address `data` by rank 0's (collective, blocking). */
    int (*broadcast)(struct mxc__kv_comm *c, float *data, int64_t n);
    /* Starts summing `n` floats at host address `data` across all processes in place;
     * calls mxc_engine_complete(done, status) when the sum is there (status MXC_EDEVICE
     * with a message when a process failed or vanished). Every process issues the same
     * sequence of allreduce calls (same keys in the same order, by construction of the
     * store); the result is bitwise identical on every process. `key` is for messages.
     * `more`: the caller issues another allreduce right after this one, so this one is
     * left to be fused with what follows; else, when no other thread is driving the
     * sums, it may run on the calling thread before the call returns (up to MXC__SPIN_NS waiting for the
     * other processes, and one bucket's transfer), saving the hand-offs to and from the
     * communication thread that dominate a lone key's time. */
    void (*allreduce)(struct mxc__kv_comm *c, int key, float *data, int64_t n, bool more,
                      mxc_engine_done *done);
    /* Waits for every process (collective). */
    int (*barrier)(struct mxc__kv_comm *c);
    void (*free)(struct mxc__kv_comm *c);
};

struct mxc__kv_comm {
    const struct mxc__kv_comm_ops *ops;
    int rank, size;
};

/* The MPI communicator (kvstore/dist_mpi.c): initialises MPI once per process. Returns
 * MXC_OK, MXC_ENOTSUP (built without USE_MPI), MXC_EDEVICE (MPI cannot start). */
int mxc__kv_comm_mpi(struct mxc__kv_comm **out);

#endif /* MXC_KVSTORE_IMPL_H */
