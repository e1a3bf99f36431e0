/*
 * tests/util/test_util.c — see test_util.h. Shared by every Check suite.
 */
#include "tests/util/test_util.h"

#include "common/common.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- Scaling and timeouts ---------------------------------------------------------- */

bool mxct_quick(void) {
    const char *v = getenv("MXC_TEST_QUICK");
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

long mxct_scaled(long normal, long quick) { return mxct_quick() ? quick : normal; }

bool mxct_under_tsan(void) {
#if defined(__SANITIZE_THREAD__)
    return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

bool mxct_under_asan(void) {
#if defined(__SANITIZE_ADDRESS__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

double mxct_timeout(double seconds) {
    if (mxct_under_tsan())
        return seconds * 15;
    if (mxct_under_asan())
        return seconds * 4;
    return seconds;
}

/* ---- Time -------------------------------------------------------------------------- */

static uint64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mxct_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

void mxct_sleep_us(long us) {
    if (us <= 0)
        return;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

uint64_t mxct_process_cpu_ns(void) { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

uint64_t mxct_thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

void mxct_span_begin(struct mxct_span *s) { atomic_store(&s->start_ns, mxct_now_ns()); }

void mxct_span_end(struct mxct_span *s) { atomic_store(&s->end_ns, mxct_now_ns()); }

static bool span_done(struct mxct_span *s) {
    return atomic_load(&s->start_ns) != 0 && atomic_load(&s->end_ns) != 0;
}

bool mxct_span_overlap(struct mxct_span *a, struct mxct_span *b) {
    return span_done(a) && span_done(b) && atomic_load(&a->start_ns) < atomic_load(&b->end_ns) &&
           atomic_load(&b->start_ns) < atomic_load(&a->end_ns);
}

bool mxct_span_before(struct mxct_span *a, struct mxct_span *b) {
    return span_done(a) && span_done(b) && atomic_load(&a->end_ns) <= atomic_load(&b->start_ns);
}

bool mxct_wait_at_least(atomic_int *flag, int value, long timeout_ms) {
    uint64_t deadline = mxct_now_ns() + (uint64_t)timeout_ms * 1000000u;
    while (atomic_load(flag) < value) {
        if (mxct_now_ns() > deadline)
            return false;
        mxct_sleep_us(100);
    }
    return true;
}

/* ---- Random numbers and hashing ---------------------------------------------------- */

uint64_t mxct_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    x ^= x >> 31;
    return x;
}

void mxct_rng_seed(struct mxct_rng *r, uint64_t seed) { r->state = seed; }

uint64_t mxct_rng_next(struct mxct_rng *r) {
    r->state += 0x9e3779b97f4a7c15u;
    return mxct_mix64(r->state);
}

uint32_t mxct_rng_below(struct mxct_rng *r, uint32_t n) {
    return (uint32_t)((mxct_rng_next(r) >> 32) * n >> 32);
}

bool mxct_rng_percent(struct mxct_rng *r, unsigned percent) {
    return mxct_rng_below(r, 100) < percent;
}

/* ---- Notes ------------------------------------------------------------------------- */

static pthread_mutex_t notes_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int notes_count;
static char notes_first[512];

void mxct_notes_reset(void) {
    pthread_mutex_lock(&notes_lock);
    atomic_store(&notes_count, 0);
    notes_first[0] = '\0';
    pthread_mutex_unlock(&notes_lock);
}

void mxct_note(const char *fmt, ...) {
    pthread_mutex_lock(&notes_lock);
    if (atomic_fetch_add(&notes_count, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(notes_first, sizeof notes_first, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&notes_lock);
}

int mxct_note_count(void) { return atomic_load(&notes_count); }

const char *mxct_first_note(void) {
    static char copy[sizeof notes_first];
    pthread_mutex_lock(&notes_lock);
    memcpy(copy, notes_first, sizeof copy);
    pthread_mutex_unlock(&notes_lock);
    return copy;
}

/* ---- Engines ----------------------------------------------------------------------- */

bool mxct_engine_threaded(int type) { return type != MXC_ENGINE_NAIVE; }

mxc_engine *mxct_engine_new(int type, const mxc_engine_config *config) {
    mxct_notes_reset();
    mxc_engine *e = NULL;
    int rc = mxc_engine_create(type, config, &e);
    ck_assert_msg(rc == MXC_OK, "mxc_engine_create(%s) = %s: %s", mxc_engine_type_name(type),
                  mxc_err_name(rc), mxc_last_error());
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(mxc_engine_type_of(e), type);
    return e;
}

mxc_var **mxct_vars_new(mxc_engine *engine, int n) {
    mxc_var **vars = calloc((size_t)n, sizeof *vars);
    ck_assert_ptr_nonnull(vars);
    for (int i = 0; i < n; i++) {
        int rc = mxc_engine_new_var(engine, &vars[i]);
        ck_assert_msg(rc == MXC_OK, "mxc_engine_new_var = %s: %s", mxc_err_name(rc),
                      mxc_last_error());
        ck_assert_ptr_nonnull(vars[i]);
    }
    return vars;
}

void mxct_engine_finish(mxc_engine *engine) {
    int rc = mxc_engine_wait_all(engine);
    ck_assert_msg(rc == MXC_OK, "final mxc_engine_wait_all = %s: %s", mxc_err_name(rc),
                  mxc_last_error());
    mxc_engine_destroy(engine);
}

/* ---- Threads ----------------------------------------------------------------------- */

void mxct_run_threads(int n, void *(*fn)(void *), void *args, size_t arg_size) {
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    ck_assert_ptr_nonnull(threads);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, fn, (char *)args + (size_t)i * arg_size),
                         0);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    free(threads);
}

/* ---- Allocator --------------------------------------------------------------------- */

/* Takes one allocation from the budget; false when this one must fail. */
static bool alloc_allowed(struct mxct_alloc_counts *c) {
    long limit = atomic_load(&c->fail_after);
    if (limit >= 0 && atomic_fetch_add(&c->succeeded, 1) >= limit) {
        atomic_fetch_sub(&c->succeeded, 1);
        /* One-shot: the thread that disarms the limit fails; a racing one succeeds. */
        if (atomic_load(&c->fail_once) &&
            !atomic_compare_exchange_strong(&c->fail_after, &limit, -1)) {
            atomic_fetch_add(&c->succeeded, 1);
            return true;
        }
        atomic_fetch_add(&c->failures, 1);
        return false;
    }
    if (limit < 0)
        atomic_fetch_add(&c->succeeded, 1);
    return true;
}

static void *counting_malloc(void *user, size_t size) {
    struct mxct_alloc_counts *c = user;
    atomic_fetch_add(&c->mallocs, 1);
    if (!alloc_allowed(c))
        return NULL;
    void *p = malloc(size);
    if (p)
        atomic_fetch_add(&c->live, 1);
    return p;
}

static void *counting_realloc(void *user, void *ptr, size_t size) {
    struct mxct_alloc_counts *c = user;
    atomic_fetch_add(&c->reallocs, 1);
    if (!alloc_allowed(c))
        return NULL;
    void *p = realloc(ptr, size);
    if (p && ptr == NULL)
        atomic_fetch_add(&c->live, 1);
    return p;
}

static void counting_free(void *user, void *ptr) {
    struct mxct_alloc_counts *c = user;
    atomic_fetch_add(&c->frees, 1);
    if (ptr)
        atomic_fetch_sub(&c->live, 1);
    free(ptr);
}

void mxct_alloc_install(struct mxct_alloc_counts *c) {
    atomic_store(&c->mallocs, 0);
    atomic_store(&c->reallocs, 0);
    atomic_store(&c->frees, 0);
    atomic_store(&c->failures, 0);
    atomic_store(&c->live, 0);
    atomic_store(&c->fail_after, -1);
    atomic_store(&c->succeeded, 0);
    atomic_store(&c->fail_once, false);
    mxc_allocator a = {counting_malloc, counting_realloc, counting_free, c};
    mxc_set_allocator(&a);
}

void mxct_alloc_fail_after(struct mxct_alloc_counts *c, long n) {
    atomic_store(&c->fail_after, -1);
    atomic_store(&c->succeeded, 0);
    atomic_store(&c->failures, 0);
    atomic_store(&c->fail_once, false);
    atomic_store(&c->fail_after, n);
}

void mxct_alloc_fail_once(struct mxct_alloc_counts *c, long n) {
    mxct_alloc_fail_after(c, -1);
    atomic_store(&c->fail_once, n >= 0);
    atomic_store(&c->fail_after, n);
}

void mxct_alloc_uninstall(void) { mxc_set_allocator(NULL); }

/* ---- Files ------------------------------------------------------------------------- */

char *mxct_temp_file(const char *prefix) {
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    size_t n = strlen(dir) + strlen(prefix) + 16;
    char *path = malloc(n);
    ck_assert_ptr_nonnull(path);
    snprintf(path, n, "%s/%sXXXXXX", dir, prefix);
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp(%s): %s", path, strerror(errno));
    close(fd);
    return path;
}

char *mxct_temp_dir(const char *prefix) {
    char *path = mxct_temp_file(prefix);
    unlink(path);
    ck_assert_msg(mkdir(path, 0700) == 0, "mkdir(%s): %s", path, strerror(errno));
    return path;
}

char *mxct_temp_fifo(const char *prefix) {
    char *path = mxct_temp_file(prefix);
    unlink(path);
    ck_assert_msg(mkfifo(path, 0600) == 0, "mkfifo(%s): %s", path, strerror(errno));
    return path;
}

char *mxct_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf == NULL)
            break;
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        cap *= 2;
        char *bigger = realloc(buf, cap);
        if (bigger == NULL) {
            free(buf);
            buf = NULL;
        }
        buf = bigger;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}

/* ---- JSON syntax ------------------------------------------------------------------- */

struct json_cursor {
    const char *p;
    int depth;
};

static void json_ws(struct json_cursor *c) {
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')
        c->p++;
}

static bool json_value(struct json_cursor *c);

static bool json_literal(struct json_cursor *c, const char *word) {
    size_t n = strlen(word);
    if (strncmp(c->p, word, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool is_hex(char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

static bool json_string(struct json_cursor *c) {
    if (*c->p != '"')
        return false;
    c->p++;
    for (;;) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '\0' || ch < 0x20)
            return false;
        c->p++;
        if (ch == '"')
            return true;
        if (ch == '\\') {
            char e = *c->p++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++)
                    if (!is_hex(*c->p++))
                        return false;
            } else if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
                return false;
            }
        }
    }
}

static bool json_digits(struct json_cursor *c) {
    if (*c->p < '0' || *c->p > '9')
        return false;
    while (*c->p >= '0' && *c->p <= '9')
        c->p++;
    return true;
}

static bool json_number(struct json_cursor *c) {
    if (*c->p == '-')
        c->p++;
    if (*c->p == '0')
        c->p++;
    else if (!json_digits(c))
        return false;
    if (*c->p == '.') {
        c->p++;
        if (!json_digits(c))
            return false;
    }
    if (*c->p == 'e' || *c->p == 'E') {
        c->p++;
        if (*c->p == '+' || *c->p == '-')
            c->p++;
        if (!json_digits(c))
            return false;
    }
    return true;
}

/* An object (`close` '}') or array (']') after its opening character. */
static bool json_container(struct json_cursor *c, char close) {
    if (++c->depth > 256)
        return false;
    c->p++;
    json_ws(c);
    if (*c->p == close) {
        c->p++;
        c->depth--;
        return true;
    }
    for (;;) {
        if (close == '}') {
            if (!json_string(c))
                return false;
            json_ws(c);
            if (*c->p++ != ':')
                return false;
        }
        if (!json_value(c))
            return false;
        json_ws(c);
        if (*c->p == ',') {
            c->p++;
            json_ws(c);
            continue;
        }
        if (*c->p != close)
            return false;
        c->p++;
        c->depth--;
        return true;
    }
}

static bool json_value(struct json_cursor *c) {
    json_ws(c);
    switch (*c->p) {
    case '{': return json_container(c, '}');
    case '[': return json_container(c, ']');
    case '"': return json_string(c);
    case 't': return json_literal(c, "true");
    case 'f': return json_literal(c, "false");
    case 'n': return json_literal(c, "null");
    default: return json_number(c);
    }
}

bool mxct_json_valid(const char *text) {
    struct json_cursor c = {text, 0};
    if (!json_value(&c))
        return false;
    json_ws(&c);
    return *c.p == '\0';
}

int mxct_run_suite(Suite *suite) {
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

mxc_symbol *mxct_sym_var(const char *name) {
    mxc_symbol *s = NULL;
    CK_OK(mxc_symbol_variable(name, &s));
    return s;
}

mxc_symbol *mxct_sym_apply(const char *op, const char *name, int n, mxc_symbol **in, int np,
                           const char *const *keys, const char *const *vals) {
    mxc_symbol *out = NULL;
    CK_OK(mxc_symbol_create(op, np, keys, vals, name, n, NULL, in, &out));
    for (int i = 0; i < n; i++)
        mxc_symbol_free(in[i]);
    return out;
}

mxc_symbol *mxct_sym_output(const mxc_symbol *s, int index) {
    mxc_symbol *h = NULL;
    CK_OK(mxc_symbol_get_output(s, index, &h));
    return h;
}

/* ---- Child processes --------------------------------------------------------------- */

bool mxct_on_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char *copy = strdup(path), *save = NULL;
    bool found = false;
    for (char *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, name);
        found = access(p, X_OK) == 0;
    }
    free(copy);
    return found;
}

int mxct_run(const char *label, const char *const *argv, const char *const *env, double limit_s,
             double *took, char **output) {
    char *out_path = mxct_temp_file("run");
    fflush(NULL);
    uint64_t t0 = mxct_now_ns();
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        if (mxct_under_asan()) {
            const char *old = getenv("ASAN_OPTIONS");
            char opts[1024];
            snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "",
                     old && old[0] ? ":" : "");
            setenv("ASAN_OPTIONS", opts, 1);
        }
        setpgid(0, 0);
        if (!freopen(out_path, "w", stdout) || dup2(fileno(stdout), 2) < 0)
            _exit(126);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0, result = -1;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            break;
        }
        if ((double)(mxct_now_ns() - t0) * 1e-9 > limit_s) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        mxct_sleep_us(20000);
    }
    double secs = (double)(mxct_now_ns() - t0) * 1e-9;
    if (took)
        *took = secs;
    *output = mxct_read_file(out_path, NULL);
    if (!*output)
        *output = strdup("");
    printf("---- %s: exit %d after %.1f s\n%s----\n", label, result, secs, *output);
    unlink(out_path);
    free(out_path);
    return result;
}

void mxct_expect_error(int rc, int code, const char *const *needles) {
    ck_assert_msg(rc == code, "expected %s, got %s (%s)", mxc_err_name(code), mxc_err_name(rc),
                  mxc_last_error());
    for (int i = 0; needles[i]; i++)
        ck_assert_msg(strstr(mxc_last_error(), needles[i]), "message '%s' lacks '%s'",
                      mxc_last_error(), needles[i]);
}

void mxct_expect_shape(const mxc_shape *got, const mxc_shape *want, const char *what) {
    char a[128], b[128];
    bool same = got->ndim == want->ndim;
    for (int i = 0; same && i < want->ndim; i++)
        same = got->dims[i] == want->dims[i];
    ck_assert_msg(same, "%s: got %s, expected %s", what, mxc__shape_str(got, a, sizeof a),
                  mxc__shape_str(want, b, sizeof b));
}
