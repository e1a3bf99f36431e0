/*
 * kvstore/kvstore_store.h — what kvstore.c offers other library code and the tests
 * beyond the public mxc/kvstore.h. Internal.
 */
#ifndef MXC_KVSTORE_STORE_H
#define MXC_KVSTORE_STORE_H

#include "kvstore/kvstore_impl.h"

/* A dist_sync store over communicator `comm` (which it owns from the call on, freed with
 * the store or at once on failure): what mxc_kvstore_create("dist_sync") does with
 * mxc__kv_comm_mpi's communicator, open to the tests' in-process communicators. */
int mxc__kvstore_create_dist(const char *fn, struct mxc__kv_comm *comm, mxc_kvstore **out);

#endif /* MXC_KVSTORE_STORE_H */
