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
    /* An argument may be the message itself (a caller passing its callee's failure on):
     * format aside, then copy. */
    char scratch[ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(scratch, sizeof scratch, fmt, ap);
    va_end(ap);
    memcpy(last_error.message, scratch, strlen(scratch) + 1);
    last_error.code = code;
    return code;
}

/* The length of a public-call name leading `message` ("mxc_nd_copy_to: "), else 0. */
static size_t public_call_prefix(const char *message) {
    if (strncmp(message, "mxc_", 4) != 0 || message[4] == '_')
        return 0;
    size_t n = 4;
    while ((message[n] >= 'a' && message[n] <= 'z') || (message[n] >= '0' && message[n] <= '9') ||
           message[n] == '_')
        n++;
    return message[n] == ':' && message[n + 1] == ' ' ? n + 2 : 0;
}

int mxc__error_set(int code, const char *message) {
    if (message == NULL)
        message = "";
    size_t n = strnlen(message, sizeof last_error.message - 1);
    memmove(last_error.message, message, n); /* it may lie inside the buffer */
    last_error.message[n] = '\0';
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
    const char *inner = last_error.message[0] != '\0' ? last_error.message : mxc_strerror(code);
    snprintf(why, sizeof why, "%s", inner + public_call_prefix(inner));
    return mxc__error(code, "%s: %s", prefix, why);
}

void mxc__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "mxc: internal invariant broken: %s (%s:%d)\n", expr, file, line);
    abort();
}
