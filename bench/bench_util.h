/*
 * bench/bench_util.h — helpers every mxc benchmark shares: a monotonic clock, medians,
 * the process's resident memory (current and peak, with a reset of the peak), and the
 * one-JSON-object-per-line printer (DESIGN.md section 10).
 *
 * Header-only (static inline), so each bench/bench_*.c stays a single translation unit.
 */
#ifndef MXC_BENCH_UTIL_H
#define MXC_BENCH_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* ---- Time -------------------------------------------------------------------------- */

/** Nanoseconds on CLOCK_MONOTONIC. */
static inline uint64_t bench_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/** Sleeps for `ms` milliseconds. */
static inline void bench_sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

/** Busy-waits (no sleep, no yield) until `ns` nanoseconds have passed. */
static inline void bench_spin_ns(uint64_t ns) {
    uint64_t start = bench_now_ns();
    while (bench_now_ns() - start < ns) {
    }
}

/* ---- Statistics -------------------------------------------------------------------- */

static inline int bench__cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/** The median of `n` values (mean of the middle two for even n); NAN when n is 0.
 * `v` is sorted in place. */
static inline double bench_median(double *v, int n) {
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, bench__cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- Memory ------------------------------------------------------------------------ */

/** A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), or -1 if unavailable. */
static inline long bench_status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    size_t len = strlen(field);
    long kib = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = strtol(line + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

/** Current resident set size in KiB, or -1. */
static inline long bench_rss_kib(void) { return bench_status_kib("VmRSS"); }

/** Peak resident set size (VmHWM) in KiB since start or the last reset, or -1. */
static inline long bench_peak_rss_kib(void) { return bench_status_kib("VmHWM"); }

/** Returns freed heap memory to the system (glibc's malloc_trim), then resets the peak
 * RSS to the current RSS by writing "5" to /proc/self/clear_refs (Linux >= 4.0).
 * Returns 0 when the peak was reset, -1 when it could not be (the peak then runs from
 * process start, or from the last successful reset). */
static inline int bench_reset_peak_rss(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("5", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok ? 0 : -1;
}

/* ---- JSON lines -------------------------------------------------------------------- */

/** One JSON object being built; fields keep the order they are added in. */
typedef struct bench_json {
    char buf[2048];
    size_t len;
    int overflow;
} bench_json;

static inline void bench__json_raw(bench_json *j, const char *fmt, ...) {
    if (j->overflow)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof j->buf - j->len)
        j->overflow = 1;
    else
        j->len += (size_t)n;
}

static inline void bench__json_string(bench_json *j, const char *s) {
    bench__json_raw(j, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            bench__json_raw(j, "\\%c", c);
        else if (c < 0x20)
            bench__json_raw(j, "\\u%04x", c);
        else
            bench__json_raw(j, "%c", c);
    }
    bench__json_raw(j, "\"");
}

static inline void bench__json_key(bench_json *j, const char *key) {
    bench__json_raw(j, j->len > 1 ? "," : "");
    bench__json_string(j, key);
    bench__json_raw(j, ":");
}

/** Starts an object with the "bench" and "case" fields every line carries. */
static inline void bench_json_begin(bench_json *j, const char *bench, const char *kase) {
    j->len = 0;
    j->overflow = 0;
    j->buf[0] = '\0';
    bench__json_raw(j, "{");
    bench__json_key(j, "bench");
    bench__json_string(j, bench);
    bench__json_key(j, "case");
    bench__json_string(j, kase);
}

/** Adds a string field; NULL writes null. */
static inline void bench_json_str(bench_json *j, const char *key, const char *value) {
    bench__json_key(j, key);
    if (value)
        bench__json_string(j, value);
    else
        bench__json_raw(j, "null");
}

/** Adds a number field; NaN and infinities write null. */
static inline void bench_json_num(bench_json *j, const char *key, double value) {
    bench__json_key(j, key);
    if (isfinite(value))
        bench__json_raw(j, "%.6g", value);
    else
        bench__json_raw(j, "null");
}

/** Closes the object and prints it as one line on `f`. */
static inline void bench_json_print(bench_json *j, FILE *f) {
    bench__json_raw(j, "}");
    if (j->overflow) {
        fprintf(stderr, "bench: JSON line too long, dropped\n");
        return;
    }
    fprintf(f, "%s\n", j->buf);
    fflush(f);
}

#endif /* MXC_BENCH_UTIL_H */
