/*
 * kvstore/dist_mpi.c — the communicator of dist_sync stores over MPI
 * (kvstore/kvstore_impl.h). Without USE_MPI it only says how to get one.
 */
#include "kvstore/kvstore_impl.h"

int mxc__kv_comm_mpi(struct mxc__kv_comm **out) {
    *out = NULL;
    return mxc__error(MXC_ENOTSUP, "dist_sync needs MPI: build mxc with USE_MPI=1 "
                                   "(OpenMPI: libopenmpi-dev) and start it with mpirun");
}
