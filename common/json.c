/*
 * common/json.c — JSON text: a growable string to write it, and a small strict parser of
 * its own to read it (RFC 8259; line and column in every error, depth limited, no
 * dependency). See common/json.h.
 */
#include "common/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The growable string ------------------------------------------------------------------ */

static bool buf_reserve(struct mxc__buf *b, size_t extra) {
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *d = mxc__realloc(b->data, cap);
    if (d == NULL) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void mxc__buf_printf(struct mxc__buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0 || !buf_reserve(b, (size_t)n))
        return;
    if ((size_t)n < sizeof small) {
        memcpy(b->data + b->len, small, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void mxc__buf_puts(struct mxc__buf *b, const char *s) {
    size_t n = strlen(s);
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n + 1);
    b->len += n;
}

void mxc__buf_json_str(struct mxc__buf *b, const char *s) {
    mxc__buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': mxc__buf_puts(b, "\\\""); break;
        case '\\': mxc__buf_puts(b, "\\\\"); break;
        case '\n': mxc__buf_puts(b, "\\n"); break;
        case '\t': mxc__buf_puts(b, "\\t"); break;
        case '\r': mxc__buf_puts(b, "\\r"); break;
        default:
            if (*p < 0x20) {
                mxc__buf_printf(b, "\\u%04x", *p);
            } else {
                char c[2] = {(char)*p, 0};
                mxc__buf_puts(b, c);
            }
        }
    }
    mxc__buf_puts(b, "\"");
}

/* ---- The parser ---------------------------------------------------------- */

struct jparser {
    const char *p, *start;
    int line;
    const char *line_start;
    int depth;
    const char *source; /* names the text in messages: "symbol JSON" */
};

#define JSON_MAX_DEPTH 64

void mxc__json_free(struct mxc__json *v) {
    if (v == NULL)
        return;
    mxc__free(v->str);
    for (int i = 0; i < v->n; i++) {
        mxc__json_free(&v->items[i]);
        if (v->keys)
            mxc__free(v->keys[i]);
    }
    mxc__free(v->items);
    mxc__free(v->keys);
    *v = (struct mxc__json){0};
}

static int jerr(struct jparser *ps, const char *what) {
    int col = (int)(ps->p - ps->line_start) + 1;
    if (*ps->p == '\0')
        return mxc__error(MXC_EFORMAT, "%s, line %d, column %d: %s (the text ends there)",
                          ps->source, ps->line, col, what);
    return mxc__error(MXC_EFORMAT, "%s, line %d, column %d: %s (found '%c')", ps->source, ps->line,
                      col, what, *ps->p);
}

static void skip_ws(struct jparser *ps) {
    for (;;) {
        char c = *ps->p;
        if (c == '\n') {
            ps->line++;
            ps->line_start = ps->p + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        ps->p++;
    }
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static int parse_string(struct jparser *ps, char **out) {
    ps->p++; /* opening quote */
    struct mxc__buf b = {0};
    mxc__buf_puts(&b, "");
    for (;;) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c == '\0' || c < 0x20) {
            mxc__free(b.data);
            return jerr(ps, c == '\0' ? "unterminated string"
                                      : "control character in "
                                        "a string");
        }
        if (c != '\\') {
            char s[2] = {(char)c, 0};
            mxc__buf_puts(&b, s);
            ps->p++;
            continue;
        }
        ps->p++;
        char e = *ps->p;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            char s[2] = {repl[simple - "\"\\/bfnrt"], 0};
            mxc__buf_puts(&b, s);
            ps->p++;
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || hex4(ps->p + 1, &cp) != 0) {
            mxc__free(b.data);
            return jerr(ps, "bad escape in a string");
        }
        ps->p += 5;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, &lo) != 0 || lo < 0xDC00 ||
                lo > 0xDFFF) {
                mxc__free(b.data);
                return jerr(ps, "unpaired UTF-16 surrogate in a string");
            }
            ps->p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            mxc__free(b.data);
            return jerr(ps, "unpaired UTF-16 surrogate in a string");
        }
        if (cp == 0) {
            mxc__free(b.data);
            return jerr(ps, "\\u0000 in a string is not supported");
        }
        char u[5] = {0};
        if (cp < 0x80) {
            u[0] = (char)cp;
        } else if (cp < 0x800) {
            u[0] = (char)(0xC0 | (cp >> 6));
            u[1] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            u[0] = (char)(0xE0 | (cp >> 12));
            u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
            u[2] = (char)(0x80 | (cp & 0x3F));
        } else {
            u[0] = (char)(0xF0 | (cp >> 18));
            u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
            u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
            u[3] = (char)(0x80 | (cp & 0x3F));
        }
        mxc__buf_puts(&b, u);
    }
    if (b.failed) {
        mxc__free(b.data);
        return mxc__error(MXC_ENOMEM, "out of memory parsing JSON");
    }
    *out = b.data;
    return MXC_OK;
}

static int parse_number(struct jparser *ps, double *out) {
    const char *s = ps->p;
    if (*s == '-')
        s++;
    if (*s == '0') {
        s++;
    } else if (*s >= '1' && *s <= '9') {
        while (*s >= '0' && *s <= '9')
            s++;
    } else {
        return jerr(ps, "expected a value");
    }
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return jerr(ps, "bad number");
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return jerr(ps, "bad number");
        while (*s >= '0' && *s <= '9')
            s++;
    }
    *out = strtod(ps->p, NULL);
    ps->p = s;
    return MXC_OK;
}

static int parse_value(struct jparser *ps, struct mxc__json *v);

/* Appends a slot to an array or object value. */
static int grow(struct mxc__json *v, int *cap, bool with_keys) {
    if (v->n < *cap)
        return MXC_OK;
    int c = *cap ? 2 * *cap : 4;
    struct mxc__json *items = mxc__realloc(v->items, sizeof *items * (size_t)c);
    if (items == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory parsing JSON");
    v->items = items;
    if (with_keys) {
        char **keys = mxc__realloc(v->keys, sizeof *keys * (size_t)c);
        if (keys == NULL)
            return mxc__error(MXC_ENOMEM, "out of memory parsing JSON");
        v->keys = keys;
    }
    *cap = c;
    return MXC_OK;
}

static int parse_container(struct jparser *ps, struct mxc__json *v, bool obj) {
    char close = obj ? '}' : ']';
    int cap = 0, rc;
    v->type = obj ? MXC__JSON_OBJ : MXC__JSON_ARR;
    if (++ps->depth > JSON_MAX_DEPTH)
        return jerr(ps, "nested too deeply");
    ps->p++;
    skip_ws(ps);
    if (*ps->p == close) {
        ps->p++;
        ps->depth--;
        return MXC_OK;
    }
    for (;;) {
        skip_ws(ps);
        if ((rc = grow(v, &cap, obj)) != MXC_OK)
            return rc;
        char *key = NULL;
        if (obj) {
            if (*ps->p != '"')
                return jerr(ps, "expected a string key");
            if ((rc = parse_string(ps, &key)) != MXC_OK)
                return rc;
            skip_ws(ps);
            if (*ps->p != ':') {
                mxc__free(key);
                return jerr(ps, "expected ':'");
            }
            ps->p++;
            skip_ws(ps);
            v->keys[v->n] = key;
        }
        v->items[v->n] = (struct mxc__json){0};
        v->n++;
        if ((rc = parse_value(ps, &v->items[v->n - 1])) != MXC_OK)
            return rc;
        skip_ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            if (*ps->p == close)
                return jerr(ps, "trailing comma");
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            ps->depth--;
            return MXC_OK;
        }
        return jerr(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(struct jparser *ps, struct mxc__json *v) {
    skip_ws(ps);
    v->line = ps->line;
    v->col = (int)(ps->p - ps->line_start) + 1;
    switch (*ps->p) {
    case '{': return parse_container(ps, v, true);
    case '[': return parse_container(ps, v, false);
    case '"': v->type = MXC__JSON_STR; return parse_string(ps, &v->str);
    case 't':
    case 'f':
    case 'n': {
        const char *word = *ps->p == 't' ? "true" : *ps->p == 'f' ? "false" : "null";
        size_t len = strlen(word);
        if (strncmp(ps->p, word, len) != 0)
            return jerr(ps, "expected a value");
        v->type = *ps->p == 'n' ? MXC__JSON_NULL : MXC__JSON_BOOL;
        v->b = *ps->p == 't';
        ps->p += len;
        return MXC_OK;
    }
    default: v->type = MXC__JSON_NUM; return parse_number(ps, &v->num);
    }
}

int mxc__json_parse(const char *text, const char *source, struct mxc__json *out) {
    struct jparser ps = {text, text, 1, text, 0, source};
    *out = (struct mxc__json){0};
    int rc = parse_value(&ps, out);
    if (rc == MXC_OK) {
        skip_ws(&ps);
        if (*ps.p != '\0')
            rc = jerr(&ps, "unexpected text after the JSON value");
    }
    if (rc != MXC_OK)
        mxc__json_free(out);
    return rc;
}

const struct mxc__json *mxc__json_get(const struct mxc__json *obj, const char *key) {
    for (int i = 0; obj->type == MXC__JSON_OBJ && i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

const char *mxc__json_type_name(int t) {
    static const char *const names[] = {"null",     "a boolean", "a number",
                                        "a string", "an array",  "an object"};
    return names[t];
}
