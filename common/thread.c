/*
 * common/thread.c — thread creation with names and small per-thread ids.
 */
#define _GNU_SOURCE
#include "common/thread.h"

#include "common/common.h"

#include <stdatomic.h>
#include <string.h>

int mxc__thread_start(mxc__thread *t, void *(*fn)(void *), void *arg, const char *name) {
    int err = pthread_create(t, NULL, fn, arg);
    if (err != 0)
        return mxc__error(MXC_ENOMEM, "cannot start thread %s: %s", name, strerror(err));
    char short_name[16];
    strncpy(short_name, name, sizeof short_name - 1);
    short_name[sizeof short_name - 1] = '\0';
    pthread_setname_np(*t, short_name);
    return MXC_OK;
}

int mxc__thread_id(void) {
    static atomic_int next_id = 1;
    static _Thread_local int id;
    if (id == 0)
        id = atomic_fetch_add(&next_id, 1);
    return id;
}
