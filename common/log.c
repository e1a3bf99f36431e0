/*
 * common/log.c — the log hook, plus the small process helpers (clock, environment,
 * CPU count, version, dtypes) that belong to no other module.
 */
#define _GNU_SOURCE
#include "common/common.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static mxc_log_fn log_fn;
static void *log_user;
/* -1: not yet read from MXC_LOG_LEVEL. Atomic: threads that log for the first time at
 * once (an iterator's decoding threads) all read it, and may all set it to the same value. */
static _Atomic int log_min_level = -1;

static int level_from_env(void) {
    const char *v = getenv("MXC_LOG_LEVEL");
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (v)
        for (int i = 0; i < 4; i++)
            if (strcasecmp(v, names[i]) == 0)
                return i;
    return MXC_LOG_WARN;
}

void mxc_set_log(mxc_log_fn fn, void *user, int min_level) {
    log_fn = fn;
    log_user = user;
    atomic_store_explicit(&log_min_level, min_level < MXC_LOG_DEBUG ? MXC_LOG_DEBUG : min_level,
                          memory_order_relaxed);
}

bool mxc__log_enabled(int level) {
    int min = atomic_load_explicit(&log_min_level, memory_order_relaxed);
    if (min < 0) {
        int unset = -1, env = level_from_env();
        /* a level mxc_set_log stored meanwhile wins */
        min = atomic_compare_exchange_strong(&log_min_level, &unset, env) ? env : unset;
    }
    return level >= min;
}

void mxc__log(int level, const char *fmt, ...) {
    if (!mxc__log_enabled(level))
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (log_fn) {
        log_fn(log_user, level, line);
    } else {
        static const char *tags[] = {"debug", "info", "warn", "error"};
        fprintf(stderr, "mxc %s: %s\n", tags[level < 0 ? 0 : level > 3 ? 3 : level], line);
    }
}

uint64_t mxc__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mxc__thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

long mxc__env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return fallback;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || x < 0) {
        mxc__log(MXC_LOG_WARN, "ignoring %s=%s: expected a non-negative integer", name, v);
        return fallback;
    }
    return x;
}

int mxc__cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

const char *mxc_version(void) { return "0.1.0"; }

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [MXC_FLOAT32] = {"float32", 4},   [MXC_FLOAT64] = {"float64", 8},
    [MXC_FLOAT16] = {"float16", 2},   [MXC_UINT8] = {"uint8", 1},
    [MXC_INT32] = {"int32", 4},       [MXC_INT8] = {"int8", 1},
    [MXC_INT64] = {"int64", 8},       [MXC_BOOL] = {"bool", 1},
    [MXC_INT16] = {"int16", 2},       [MXC_UINT16] = {"uint16", 2},
    [MXC_UINT32] = {"uint32", 4},     [MXC_UINT64] = {"uint64", 8},
    [MXC_BFLOAT16] = {"bfloat16", 2},
};

size_t mxc_dtype_size(int dtype) {
    return dtype >= 0 && (size_t)dtype < MXC_ARRAY_SIZE(dtypes) ? dtypes[dtype].size : 0;
}

const char *mxc_dtype_name(int dtype) {
    return dtype >= 0 && (size_t)dtype < MXC_ARRAY_SIZE(dtypes) ? dtypes[dtype].name : NULL;
}
