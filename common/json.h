/*
 * common/json.h — JSON text, written and read: a growable string (symbols, DOT graphs and
 * the executor's debug dump are written into one) and a strict parser (symbol files,
 * initializer hints). Internal.
 */
#ifndef MXC_JSON_H
#define MXC_JSON_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- Writing ----------------------------------------------------------------------- */

/* A growable string; start from {0}, free `data` with mxc__free. */
struct mxc__buf {
    char *data;
    size_t len, cap;
    bool failed; /* an allocation failed; data holds what fitted */
};
void mxc__buf_printf(struct mxc__buf *b, const char *fmt, ...) MXC_PRINTF(2, 3);
void mxc__buf_puts(struct mxc__buf *b, const char *s);
/* Appends `s` as a JSON string literal (quotes and escapes). */
void mxc__buf_json_str(struct mxc__buf *b, const char *s);

/* ---- Reading ----------------------------------------------------------------------- */

enum mxc__json_type {
    MXC__JSON_NULL,
    MXC__JSON_BOOL,
    MXC__JSON_NUM,
    MXC__JSON_STR,
    MXC__JSON_ARR,
    MXC__JSON_OBJ
};

/* A parsed value; line and column say where it starts in the text. */
struct mxc__json {
    int type; /* an mxc__json_type */
    int line, col;
    bool b;
    double num;
    char *str;
    int n;                   /* items of an array or object */
    struct mxc__json *items; /* array items or object values */
    char **keys;             /* object keys */
};

/* Parses `text` (one value, nothing after it) into `*out`, to be freed with
 * mxc__json_free. Errors are MXC_EFORMAT "<source>, line L, column C: ..." (`source`
 * names the text for the user, e.g. "symbol JSON") or MXC_ENOMEM; `*out` is then empty. */
int mxc__json_parse(const char *text, const char *source, struct mxc__json *out);

/* Frees what a value holds and empties it. NULL is fine. */
void mxc__json_free(struct mxc__json *v);

/* The value of `key` in object `obj`, or NULL (also when `obj` is not an object). */
const struct mxc__json *mxc__json_get(const struct mxc__json *obj, const char *key);

/* "a number", "a string", ... for messages. */
const char *mxc__json_type_name(int type);

#endif /* MXC_JSON_H */
