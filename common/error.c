/*
 * common/error.c — the status-code table's strings and the thread-local last error.
 * Every failing library function records its message here before returning its code.
 */
#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERROR_MESSAGE_MAX 1024

static _Thread_local struct {
    int code;
    char message[ERROR_MESSAGE_MAX];
} last_error;

const char *mxc_strerror(int code) {
    switch (code) {
#define STATUS_CASE(name, value, desc) \
    case MXC_##name: return desc;
        MXC_STATUS_MAP(STATUS_CASE)
#undef STATUS_CASE
    }
    return "unknown status code";
}

const char *mxc_err_name(int code) {
    switch (code) {
#define STATUS_CASE(name, value, desc) \
    case MXC_##name: return "MXC_" #name;
        MXC_STATUS_MAP(STATUS_CASE)
#undef STATUS_CASE
    }
    return "MXC_UNKNOWN";
}

const char *mxc_last_error(void) { return last_error.message; }

int mxc_last_error_code(void) { return last_error.code; }

void mxc_clear_error(void) {
    last_error.code = MXC_OK;
    last_error.message[0] = '\0';
}

int mxc__error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error.message, sizeof last_error.message, fmt, ap);
    va_end(ap);
    last_error.code = code;
    return code;
}

int mxc__error_set(int code, const char *message) {
    if (message != last_error.message)
        snprintf(last_error.message, sizeof last_error.message, "%s", message ? message : "");
    last_error.code = code;
    return code;
}

int mxc__error_wrap(int code, const char *fmt, ...) {
    char prefix[256], why[ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t n = strlen(prefix);
    if (strncmp(last_error.message, prefix, n) == 0 && last_error.message[n] == ':') {
        last_error.code = code; /* already says it */
        return code;
    }
    snprintf(why, sizeof why, "%s", last_error.message);
    return mxc__error(code, "%s: %s", prefix, why);
}

void mxc__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "mxc: internal invariant broken: %s (%s:%d)\n", expr, file, line);
    abort();
}
