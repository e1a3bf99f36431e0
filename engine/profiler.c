/*
 * engine/profiler.c — records each operation's name, context, thread, start and end
 * into per-thread buffers (each worker's own; one shared, locked buffer for other
 * threads) and writes them as Chrome trace JSON for chrome://tracing or Perfetto.
 */
#include "engine/engine_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void mxc__prof_buffer_init(struct prof_buffer *b) {
    mxc__mutex_init(&b->lock);
    b->records = NULL;
    b->count = b->capacity = 0;
}

void mxc__prof_buffer_destroy(struct prof_buffer *b) {
    mxc__free(b->records);
    b->records = NULL;
    b->count = b->capacity = 0;
    mxc__mutex_destroy(&b->lock);
}

void mxc__prof_record(struct mxc_engine *eng, struct mxc_engine_done *run, uint64_t end_ns) {
    struct worker *w = mxc__current_worker();
    struct prof_buffer *b = w && w->pool->engine == eng ? &w->prof : &eng->prof_shared;
    mxc__mutex_lock(&b->lock);
    if (b->count == b->capacity) {
        size_t cap = b->capacity ? 2 * b->capacity : 1024;
        struct prof_record *r = mxc__realloc(b->records, cap * sizeof *r);
        if (r == NULL) { /* drop the record rather than fail the operation */
            mxc__mutex_unlock(&b->lock);
            return;
        }
        b->records = r;
        b->capacity = cap;
    }
    struct prof_record *r = &b->records[b->count++];
    snprintf(r->name, sizeof r->name, "%s", run->op->name ? run->op->name : "(unnamed)");
    r->ctx = run->op->ctx;
    r->tid = run->tid;
    r->start_ns = run->start_ns;
    r->end_ns = end_ns;
    mxc__mutex_unlock(&b->lock);
}

static void clear_buffer(struct prof_buffer *b, void *user) {
    mxc__mutex_lock(&b->lock);
    b->count = 0;
    mxc__mutex_unlock(&b->lock);
}

int mxc_engine_profiler_start(mxc_engine *eng) {
    int rc = mxc__engine_check(eng, __func__);
    if (rc != MXC_OK)
        return rc;
    mxc__workers_foreach_prof(eng, clear_buffer, NULL);
    eng->prof_origin_ns = mxc__now_ns();
    atomic_store(&eng->profiling, true);
    return MXC_OK;
}

int mxc_engine_profiler_stop(mxc_engine *eng) {
    int rc = mxc__engine_check(eng, __func__);
    if (rc != MXC_OK)
        return rc;
    atomic_store(&eng->profiling, false);
    return MXC_OK;
}

struct dump_state {
    FILE *f;
    uint64_t origin;
    size_t written;
};

static void write_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Chrome trace: one "complete" event (ph X) per operation, times in microseconds; the
 * process is the device (0 = CPU, 1 + id = GPU id), the thread is the worker thread. */
static void dump_buffer(struct prof_buffer *b, void *user) {
    struct dump_state *st = user;
    mxc__mutex_lock(&b->lock);
    for (size_t i = 0; i < b->count; i++) {
        const struct prof_record *r = &b->records[i];
        uint64_t start = r->start_ns > st->origin ? r->start_ns - st->origin : 0;
        int pid = r->ctx.dev_type == MXC_GPU ? 1 + r->ctx.dev_id : 0;
        fprintf(st->f, "%s\n{\"name\":", st->written++ ? "," : "");
        write_json_string(st->f, r->name);
        fprintf(st->f,
                ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                "\"pid\":%d,\"tid\":%d}",
                pid ? "gpu" : "cpu", (double)start / 1e3, (double)(r->end_ns - r->start_ns) / 1e3,
                pid, r->tid);
    }
    mxc__mutex_unlock(&b->lock);
}

int mxc_engine_profiler_dump(mxc_engine *eng, const char *path) {
    int rc = mxc__engine_check(eng, __func__);
    if (rc != MXC_OK)
        return rc;
    if (path == NULL)
        return mxc__error(MXC_EINVAL, "mxc_engine_profiler_dump: path is NULL");
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return mxc__error(MXC_EIO, "mxc_engine_profiler_dump: cannot open %s: %s", path,
                          strerror(errno));
    struct dump_state st = {f, eng->prof_origin_ns, 0};
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    fprintf(f, "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,"
               "\"args\":{\"name\":\"cpu\"}}");
    st.written = 1;
    mxc__workers_foreach_prof(eng, dump_buffer, &st);
    fprintf(f, "\n]}\n");
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed)
        return mxc__error(MXC_EIO, "mxc_engine_profiler_dump: writing %s failed", path);
    return MXC_OK;
}
