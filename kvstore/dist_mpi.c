/*
 * kvstore/dist_mpi.c — the communicator of dist_sync stores over MPI
 * (kvstore/kvstore_impl.h). Without USE_MPI it only says how to get one.
 *
 * One communication thread per communicator makes every MPI call of allreduce; the
 * store's thread makes those of check_keys, broadcast and barrier on a second duplicate
 * of MPI_COMM_WORLD, so the two sequences of collectives never interleave differently on
 * different processes. Every MPI call goes through one process-wide lock, so
 * MPI_THREAD_SERIALIZED is all this needs, and every wait is a poll of MPI_Test bounded
 * by MXC_KV_TIMEOUT_S (default 60 s): a process that died makes the others fail with
 * MXC_EDEVICE, never hang.
 *
 * Rounds. Fusion must cut the same buckets on every process, but which requests have
 * arrived when the thread looks depends on timing. So each round the processes agree on
 * the least, over the processes, of how many requests each has received, and work
 * through that many, which every process has, in order: bucket boundaries depend only on
 * the agreed count and the sizes of the requests, identical everywhere. The agreement
 * travels with the data: each process sends its count together with the bucket its own
 * count cuts at the head of its requests; the bucket a smaller count cuts is a prefix of
 * it, so the partners add the prefix the lesser count cuts (run_round). An idle thread
 * spins up to 50 µs for a request, then repeats the round with a growing sleep (up to
 * 2 ms), woken at once by a new request.
 *
 * Sum. MPI_Allreduce does not promise the same bits on every process. A round's bucket
 * (at most 32 KiB on every process, else the round only agrees and the bucket goes
 * through the ring after it) is summed by recursive doubling over point-to-point
 * messages (log2 p steps of one message each way; the ranks beyond the largest power of two fold in
 * first and get the result at the end): both partners of a step compute lower + higher from the
 * same two partial sums, so they hold the same bits, step after step. A large request is a ring
 * reduce-scatter, in which each block is added up by this file's loop along the ring and
 * finished by one process only, then a ring allgather that copies the finished blocks to
 * everyone: every process ends with the very bits that the block's last owner computed.
 *
 * Units. Requests below MXC_KV_FUSION_BYTES (default 64 KiB) are copied one after the
 * other into a bucket of up to MXC_KV_BUCKET_BYTES (default 1 MiB), summed at once and
 * copied back; larger ones are summed in place in chunks of MXC_KV_CHUNK_BYTES (default
 * 8 MiB) — a multiple of the number of processes, the tail through the bucket buffer.
 * The settings must agree across processes (checked when the communicator starts).
 */
#include "kvstore/kvstore_impl.h"

#ifndef MXC_USE_MPI

int mxc__kv_comm_mpi(struct mxc__kv_comm **out) {
    *out = NULL;
    return mxc__error(MXC_ENOTSUP, "dist_sync needs MPI: build mxc with USE_MPI=1 "
                                   "(OpenMPI: libopenmpi-dev) and start it with mpirun");
}

#else

#include "common/thread.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

/* ---- MPI once per process ---------------------------------------------------------- */

static pthread_once_t mpi_once = PTHREAD_ONCE_INIT;
static int mpi_status = MXC_OK;
static char mpi_message[256];
static mxc__mutex mpi_lock = PTHREAD_MUTEX_INITIALIZER; /* every MPI call */
static bool mpi_we_started;
static int live_comms; /* under mpi_lock: communicators not yet freed */
static bool mpi_finalized;
static bool mpi_broken; /* a communicator failed: its collectives may never end */

static void finalize_at_exit(void) {
    fflush(NULL); /* mpirun forwards output only until MPI_Finalize */
    mxc__mutex_lock(&mpi_lock);
    int flag = 0;
    MPI_Finalized(&flag);
    /* a communicator still running at exit (its store never freed) may have a thread in
     * the middle of a collective: finalising under it would crash, so the process ends
     * without MPI_Finalize (mpirun then reports it) */
    if (!flag && live_comms == 0 && !mpi_broken) {
        mpi_finalized = true;
        MPI_Finalize();
    } else if (!flag) {
        /* nor after a failure: a collective left pending could make MPI_Finalize wait */
        mpi_finalized = true;
        if (live_comms > 0)
            mxc__log(MXC_LOG_WARN, "dist_sync: %d store(s) still open at exit; MPI not finalised",
                     live_comms);
    }
    mxc__mutex_unlock(&mpi_lock);
}

static void mpi_start(void) {
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag) {
        bool launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") ||
                        getenv("PMI_RANK") || getenv("OMPI_COMM_WORLD_RANK");
        const char *single = getenv("MXC_KV_ALLOW_SINGLETON");
        if (!launched && !(single && single[0] && strcmp(single, "0") != 0)) {
            mpi_status = MXC_EDEVICE;
            snprintf(mpi_message, sizeof mpi_message,
                     "dist_sync: not started by mpirun: start it with "
                     "`mpirun -np N <program>` (or set MXC_KV_ALLOW_SINGLETON=1 for one "
                     "process)");
            return;
        }
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            mpi_status = MXC_EDEVICE;
            snprintf(mpi_message, sizeof mpi_message, "dist_sync: MPI_Init_thread failed");
            return;
        }
        mpi_we_started = true;
        atexit(finalize_at_exit);
        if (provided < MPI_THREAD_SERIALIZED) {
            mpi_status = MXC_EDEVICE;
            snprintf(mpi_message, sizeof mpi_message,
                     "dist_sync: MPI gives thread level %d, MPI_THREAD_SERIALIZED needed",
                     provided);
        }
    } else {
        /* the application started MPI itself: it must allow calls from our threads */
        int provided = 0;
        MPI_Query_thread(&provided);
        if (provided < MPI_THREAD_SERIALIZED) {
            mpi_status = MXC_EDEVICE;
            snprintf(mpi_message, sizeof mpi_message,
                     "dist_sync: MPI was initialised with thread level %d; "
                     "MPI_THREAD_SERIALIZED or more is needed",
                     provided);
        }
    }
}

/* ---- The communicator -------------------------------------------------------------- */

enum { REQ_DATA, REQ_STOP };

struct req {
    int kind, key;
    float *data;
    int64_t n;
    mxc_engine_done *done;
    struct req *next;
};

struct mpi_comm {
    struct mxc__kv_comm base;
    MPI_Comm data_comm; /* the communication thread's */
    MPI_Comm user_comm; /* check_keys, broadcast, barrier */
    double timeout_s;
    int64_t fusion_bytes, bucket_bytes, chunk_bytes;

    mxc__mutex lock; /* the queue below and the broken state */
    mxc__cond cond;
    struct req *head, *tail; /* received, not yet taken by the thread */
    int64_t received;        /* requests received in all */
    atomic_llong arrived;    /* the same, read without the lock by the idle spin */
    bool broken;             /* after a failure every request fails at once */
    char broken_msg[256];
    mxc__thread thread;
    bool thread_started;
    struct req *stop; /* taken at creation, so that free cannot fail */

    /* the thread's own */
    struct req *pending, *pending_tail; /* taken, not yet agreed and done */
    int64_t taken, done_count;
    float *bucket, *block; /* bucket_bytes (+ padding) and its share per process */
    float *xbuf, *rbuf;    /* a round's message: header (ROUND_HDR floats) + bucket */
    int64_t bucket_cap, block_cap;
};

static double now_s(void) { return (double)mxc__now_ns() * 1e-9; }

static int poll_request(struct mpi_comm *c, MPI_Request *r, const char *what) {
    double start = now_s(), deadline = start + c->timeout_s;
    double spin_until = start + MXC__SPIN_NS * 1e-9;
    for (long spins = 0;; spins++) {
        int flag = 0;
        mxc__mutex_lock(&mpi_lock);
        int err = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        mxc__mutex_unlock(&mpi_lock);
        if (err != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(err, s, &len);
            return mxc__error(MXC_EDEVICE, "dist_sync: rank %d: %s failed: %s", c->base.rank, what,
                              s);
        }
        if (flag)
            return MXC_OK;
        if ((spins & 255) == 255 && now_s() > deadline)
            return mxc__error(MXC_EDEVICE,
                              "dist_sync: rank %d: no answer from the other processes "
                              "within %g s (a process died?) during %s",
                              c->base.rank, c->timeout_s, what);
        /* poll without a pause up to MXC__SPIN_NS (the rule of every wait in mxc), as
         * MPI's own blocking waits do: OpenMPI moves a large message only inside its
         * calls here (the receiver copies it), and a thread that yielded the core between
         * polls made a 1 MB sum half again as slow on 2 shared cores (0.59 against 0.90
         * of a bare allreduce's speed); then nap 10 µs per poll (the communication
         * thread's timer slack is 1 µs, so a nap is not the default 60 µs) */
        if (spins < 64 || now_s() < spin_until) {
            mxc__cpu_relax();
        } else {
            struct timespec ts = {0, 10000};
            nanosleep(&ts, NULL);
        }
    }
}

static void set_broken(struct mpi_comm *c, const char *msg);

/* Polls `r` until it completes, up to the communicator's timeout; a failure breaks the
 * communicator (a collective left pending would pair with the wrong one later). */
static int wait_request(struct mpi_comm *c, MPI_Request *r, const char *what) {
    int rc = poll_request(c, r, what);
    if (rc != MXC_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", mxc_last_error());
        set_broken(c, msg);
        mxc__error(rc, "%s", msg);
    }
    return rc;
}

static int mpi_failed(struct mpi_comm *c, int err, const char *what) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, s, &len);
    return mxc__error(MXC_EDEVICE, "dist_sync: rank %d: %s failed: %s", c->base.rank, what, s);
}

/* ---- Collectives of the store's thread --------------------------------------------- */

/* MXC_EDEVICE with the first failure's message once the communicator broke. */
static int check_broken(struct mpi_comm *c) {
    mxc__mutex_lock(&c->lock);
    bool broken = c->broken;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", c->broken_msg);
    mxc__mutex_unlock(&c->lock);
    return broken ? mxc__error(MXC_EDEVICE, "%s", msg) : MXC_OK;
}

static int user_bcast(struct mpi_comm *c, void *buf, int64_t bytes, int root) {
    char *p = buf;
    while (bytes > 0) {
        int part = bytes > (1 << 30) ? (1 << 30) : (int)bytes;
        MPI_Request r;
        mxc__mutex_lock(&mpi_lock);
        int err = MPI_Ibcast(p, part, MPI_BYTE, root, c->user_comm, &r);
        mxc__mutex_unlock(&mpi_lock);
        if (err != MPI_SUCCESS)
            return mpi_failed(c, err, "MPI_Ibcast");
        int rc = wait_request(c, &r, "broadcast");
        if (rc != MXC_OK)
            return rc;
        p += part;
        bytes -= part;
    }
    return MXC_OK;
}

static int comm_broadcast(struct mxc__kv_comm *base, float *data, int64_t n) {
    int rc = check_broken((struct mpi_comm *)base);
    if (rc != MXC_OK)
        return rc;
    return user_bcast((struct mpi_comm *)base, data, n * (int64_t)sizeof(float), 0);
}

static int comm_barrier(struct mxc__kv_comm *base) {
    struct mpi_comm *c = (struct mpi_comm *)base;
    int rc = check_broken(c);
    if (rc != MXC_OK)
        return rc;
    MPI_Request r;
    mxc__mutex_lock(&mpi_lock);
    int err = MPI_Ibarrier(c->user_comm, &r);
    mxc__mutex_unlock(&mpi_lock);
    if (err != MPI_SUCCESS)
        return mpi_failed(c, err, "MPI_Ibarrier");
    return wait_request(c, &r, "barrier");
}

/* A key and its shape as 2 + MXC_MAX_NDIM integers. */
enum { KEY_WORDS = 2 + MXC_MAX_NDIM };

static void encode_keys(int num, const int *keys, const mxc_shape *shapes, int64_t *w) {
    for (int i = 0; i < num; i++) {
        int64_t *k = w + (int64_t)i * KEY_WORDS;
        k[0] = keys[i];
        k[1] = shapes[i].ndim;
        for (int d = 0; d < MXC_MAX_NDIM; d++)
            k[2 + d] = d < shapes[i].ndim ? shapes[i].dims[d] : 0;
    }
}

static uint64_t hash_words(const int64_t *w, int64_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; i++) {
        h ^= (uint64_t)w[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xbf58476d1ce4e5b9ull;
    }
    return h;
}

static const char *shape_words_str(const int64_t *k, char *buf, size_t size) {
    mxc_shape s = {0};
    s.ndim = (int32_t)k[1];
    for (int d = 0; d < MXC_MAX_NDIM && d < s.ndim; d++)
        s.dims[d] = k[2 + d];
    return mxc__shape_str(&s, buf, size);
}

static int comm_check_keys(struct mxc__kv_comm *base, int num, const int *keys,
                           const mxc_shape *shapes) {
    struct mpi_comm *c = (struct mpi_comm *)base;
    int size = base->size, rc = check_broken(c);
    if (rc != MXC_OK)
        return rc;
    int64_t *mine = NULL, *all = NULL, *w0 = NULL, *wr = NULL;
    mine = mxc__malloc(((size_t)num + 1) * KEY_WORDS * sizeof(int64_t));
    all = mxc__malloc((size_t)size * 2 * sizeof(int64_t));
    MXC_CHECK(mine && all, MXC_ENOMEM, "dist_sync: out of memory checking %d keys", num);
    encode_keys(num, keys, shapes, mine);
    int64_t summary[2] = {num, (int64_t)hash_words(mine, (int64_t)num * KEY_WORDS)};
    MPI_Request r;
    mxc__mutex_lock(&mpi_lock);
    int err = MPI_Iallgather(summary, 2, MPI_INT64_T, all, 2, MPI_INT64_T, c->user_comm, &r);
    mxc__mutex_unlock(&mpi_lock);
    if (err != MPI_SUCCESS) {
        rc = mpi_failed(c, err, "MPI_Iallgather");
        goto fail;
    }
    MXC_TRY(wait_request(c, &r, "the key check"));
    int other = -1; /* the first process whose keys differ from rank 0's */
    for (int p = 1; p < size && other < 0; p++)
        if (all[2 * p] != all[0] || all[2 * p + 1] != all[1])
            other = p;
    if (other < 0)
        goto fail; /* rc is MXC_OK */
    /* every process learns both lists and so writes the same message */
    int64_t n0 = all[0], nr = all[2 * other];
    w0 = mxc__malloc(((size_t)n0 + 1) * KEY_WORDS * sizeof(int64_t));
    wr = mxc__malloc(((size_t)nr + 1) * KEY_WORDS * sizeof(int64_t));
    MXC_CHECK(w0 && wr, MXC_ENOMEM, "dist_sync: out of memory comparing keys");
    if (base->rank == 0)
        memcpy(w0, mine, (size_t)n0 * KEY_WORDS * sizeof(int64_t));
    if (base->rank == other)
        memcpy(wr, mine, (size_t)nr * KEY_WORDS * sizeof(int64_t));
    MXC_TRY(user_bcast(c, w0, n0 * KEY_WORDS * (int64_t)sizeof(int64_t), 0));
    MXC_TRY(user_bcast(c, wr, nr * KEY_WORDS * (int64_t)sizeof(int64_t), other));
    int64_t i = 0;
    while (i < n0 && i < nr &&
           memcmp(w0 + i * KEY_WORDS, wr + i * KEY_WORDS, KEY_WORDS * sizeof(int64_t)) == 0)
        i++;
    char a[128], b[128];
    if (i < n0 && i < nr && w0[i * KEY_WORDS] == wr[i * KEY_WORDS]) {
        rc = mxc__error(MXC_EINVAL, "dist_sync: key %lld has shape %s on rank 0 but %s on rank %d",
                        (long long)w0[i * KEY_WORDS],
                        shape_words_str(w0 + i * KEY_WORDS, a, sizeof a),
                        shape_words_str(wr + i * KEY_WORDS, b, sizeof b), other);
    } else if (i < n0 && i < nr) {
        rc = mxc__error(MXC_EINVAL,
                        "dist_sync: the keys differ between processes: key number %lld is %lld "
                        "on rank 0 but %lld on rank %d (%lld and %lld keys)",
                        (long long)i, (long long)w0[i * KEY_WORDS], (long long)wr[i * KEY_WORDS],
                        other, (long long)n0, (long long)nr);
    } else {
        rc = mxc__error(MXC_EINVAL,
                        "dist_sync: the keys differ between processes: rank 0 initialises %lld "
                        "keys, rank %d %lld (the first extra key is %lld)",
                        (long long)n0, other, (long long)nr,
                        (long long)(n0 > nr ? w0[i * KEY_WORDS] : wr[i * KEY_WORDS]));
    }
fail:
    mxc__free(mine);
    mxc__free(all);
    mxc__free(w0);
    mxc__free(wr);
    return rc;
}

/* ---- The communication thread ------------------------------------------------------ */

static void complete(struct req *q, int status, const char *msg) {
    if (status != MXC_OK)
        mxc__error(status, "%s", msg);
    if (q->done)
        mxc_engine_complete(q->done, status);
    mxc__free(q);
}

/* One step of a ring: receives `n` floats from the previous process into `in` while
 * sending `n` from `out` to the next. */
static int ring_step(struct mpi_comm *c, const float *out, float *in, int64_t n) {
    int p = c->base.size, r = c->base.rank;
    MPI_Request rq[2];
    mxc__mutex_lock(&mpi_lock);
    int err = MPI_Irecv(in, (int)n, MPI_FLOAT, (r + p - 1) % p, 7, c->data_comm, &rq[0]);
    if (err == MPI_SUCCESS)
        err = MPI_Isend(out, (int)n, MPI_FLOAT, (r + 1) % p, 7, c->data_comm, &rq[1]);
    mxc__mutex_unlock(&mpi_lock);
    if (err != MPI_SUCCESS)
        return mpi_failed(c, err, "MPI_Isend/MPI_Irecv");
    int rc = wait_request(c, &rq[0], "allreduce");
    return rc != MXC_OK ? rc : wait_request(c, &rq[1], "allreduce");
}

/* Sums `blk * size` floats at `buf` across the processes, in place: a ring reduce-scatter
 * (block b is added up along the ring, ending on process b - 1, in the same order for
 * every run) then a ring allgather that copies each finished block to everyone. Every
 * block is summed by one process only, so every process ends with the same bits; the
 * additions are this file's own loop, not MPI's. */
static int sum_unit(struct mpi_comm *c, float *buf, int64_t blk) {
    int p = c->base.size, r = c->base.rank;
    for (int step = 0; step < p - 1; step++) {
        int send_b = (r - step + p) % p, recv_b = (r - step - 1 + 2 * p) % p;
        int rc = ring_step(c, buf + (int64_t)send_b * blk, c->block, blk);
        if (rc != MXC_OK)
            return rc;
        float *dst = buf + (int64_t)recv_b * blk;
        const float *src = c->block;
        for (int64_t i = 0; i < blk; i++)
            dst[i] += src[i];
    }
    /* this process now holds the sum of block r + 1 */
    for (int step = 0; step < p - 1; step++) {
        int send_b = (r + 1 - step + p) % p, recv_b = (r - step + p) % p;
        int rc = ring_step(c, buf + (int64_t)send_b * blk, buf + (int64_t)recv_b * blk, blk);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

/* Sums `n` floats through the bucket buffer (n ≤ bucket_cap), in place at `data`. */
static int64_t padded_block(struct mpi_comm *c, int64_t n) {
    return (n + c->base.size - 1) / c->base.size;
}

/* Sums the fused requests q..(count of them) through the bucket. */
static int run_bucket(struct mpi_comm *c, struct req *q, int count, int64_t total) {
    int64_t blk = padded_block(c, total), off = 0;
    struct req *p = q;
    for (int i = 0; i < count; i++, p = p->next) {
        memcpy(c->bucket + off, p->data, (size_t)p->n * sizeof(float));
        off += p->n;
    }
    memset(c->bucket + off, 0, (size_t)(blk * c->base.size - off) * sizeof(float));
    int rc = sum_unit(c, c->bucket, blk);
    if (rc != MXC_OK)
        return rc;
    off = 0;
    for (int i = 0; i < count; i++, q = q->next) {
        memcpy(q->data, c->bucket + off, (size_t)q->n * sizeof(float));
        off += q->n;
    }
    return MXC_OK;
}

static int run_large(struct mpi_comm *c, struct req *q) {
    int64_t size = c->base.size;
    int64_t chunk = c->chunk_bytes / (int64_t)sizeof(float) / size * size;
    int64_t off = 0;
    while (q->n - off >= size) {
        int64_t len = q->n - off < chunk ? (q->n - off) / size * size : chunk;
        int rc = sum_unit(c, q->data + off, len / size);
        if (rc != MXC_OK)
            return rc;
        off += len;
    }
    if (off < q->n) { /* fewer than `size` left: through the bucket */
        struct req tail = *q;
        tail.data = q->data + off;
        tail.n = q->n - off;
        tail.next = NULL;
        return run_bucket(c, &tail, 1, tail.n);
    }
    return MXC_OK;
}

static void fail_pending(struct mpi_comm *c, const char *msg) {
    while (c->pending) {
        struct req *q = c->pending;
        c->pending = q->next;
        if (q->kind == REQ_STOP) {
            mxc__free(q);
            continue;
        }
        complete(q, MXC_EDEVICE, msg);
    }
    c->pending_tail = NULL;
}

static void set_broken(struct mpi_comm *c, const char *msg) {
    mxc__mutex_lock(&c->lock);
    if (!c->broken) {
        c->broken = true;
        snprintf(c->broken_msg, sizeof c->broken_msg, "%s", msg);
    }
    mxc__mutex_unlock(&c->lock);
    mxc__mutex_lock(&mpi_lock);
    mpi_broken = true;
    mxc__mutex_unlock(&mpi_lock);
}

/* ---- Rounds: agreement and the bucket in one message ---------------------------------- */

/* A round's message: ROUND_HDR floats of header (two int64: the sender's request count
 * and whether it carries its bucket), then that bucket when it does. A bucket of more than
 * ROUND_FLOATS (32 KiB with the header) is summed by the ring after the round instead:
 * on one host a single exchange of more than OpenMPI's 32 KiB shared-memory fragment was
 * slower than the ring's two half-size steps (64 KiB: 0.41 against 0.53 GB/s). */
enum { ROUND_HDR = 4, ROUND_FLOATS = 8192 - ROUND_HDR };

static int64_t hdr_get(const float *buf, int i) {
    int64_t v;
    memcpy(&v, (const char *)buf + i * sizeof v, sizeof v);
    return v;
}

static void hdr_set(float *buf, int i, int64_t v) {
    memcpy((char *)buf + i * sizeof v, &v, sizeof v);
}

/* The bucket at the head of the pending requests when `limit` requests (done ones
 * included) are known to every process: how many requests, their total size in *floats.
 * The cut depends only on the request sequence and `limit`, and the cut for a smaller
 * limit is a prefix of the cut for a larger one. */
static int cut_bucket(struct mpi_comm *c, int64_t limit, int64_t *floats) {
    int64_t small_max = c->fusion_bytes / (int64_t)sizeof(float);
    int64_t bucket_max = c->bucket_bytes / (int64_t)sizeof(float);
    int count = 0;
    int64_t total = 0;
    for (struct req *p = c->pending;
         p && c->done_count + count < limit && p->kind == REQ_DATA && p->n <= small_max &&
         (count == 0 || total + p->n <= bucket_max);
         p = p->next) {
        total += p->n;
        count++;
    }
    *floats = total;
    return count;
}

/* Sends xbuf (header + `floats`) to process `to` and receives a round message from
 * `from` into rbuf (either -1: none), concurrently (tag 9). */
static int round_msg(struct mpi_comm *c, int to, int64_t floats, int from) {
    MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int cap = (int)((ROUND_FLOATS + ROUND_HDR) * sizeof(float));
    int err = MPI_SUCCESS;
    mxc__mutex_lock(&mpi_lock);
    if (from >= 0)
        err = MPI_Irecv(c->rbuf, cap, MPI_BYTE, from, 9, c->data_comm, &rq[0]);
    if (err == MPI_SUCCESS && to >= 0)
        err = MPI_Isend(c->xbuf, (int)((floats + ROUND_HDR) * (int64_t)sizeof(float)), MPI_BYTE, to,
                        9, c->data_comm, &rq[1]);
    mxc__mutex_unlock(&mpi_lock);
    if (err != MPI_SUCCESS)
        return mpi_failed(c, err, "MPI_Isend/MPI_Irecv");
    for (int i = 0; i < 2; i++)
        if (rq[i] != MPI_REQUEST_NULL) {
            int rc = wait_request(c, &rq[i], "allreduce");
            if (rc != MXC_OK)
                return rc;
        }
    return MXC_OK;
}

/* How many floats of xbuf a round message carries with count `m`. */
static int64_t carried_floats(struct mpi_comm *c, int64_t m) {
    int64_t n = 0;
    cut_bucket(c, m, &n);
    return hdr_get(c->xbuf, 1) ? n : 0;
}

/* Combines the partner's round message (rbuf) into ours (xbuf): the count becomes the
 * least of the two; when both carry their buckets, the bucket that count cuts — a prefix
 * of both — becomes the sum of the two, the lower rank's partial sum first. Both partners
 * compute the same bits. */
static int64_t combine(struct mpi_comm *c, int64_t mine, bool me_lower) {
    int64_t theirs = hdr_get(c->rbuf, 0), m = theirs < mine ? theirs : mine, n = 0;
    bool carried = hdr_get(c->xbuf, 1) && hdr_get(c->rbuf, 1);
    cut_bucket(c, m, &n);
    float *x = c->xbuf + ROUND_HDR;
    const float *y = c->rbuf + ROUND_HDR;
    if (carried && me_lower)
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] + y[i];
    else if (carried)
        for (int64_t i = 0; i < n; i++)
            x[i] = y[i] + x[i];
    hdr_set(c->xbuf, 0, m);
    hdr_set(c->xbuf, 1, carried);
    return m;
}

/* One round. Every process offers its request count and the bucket that count cuts at
 * the head of its pending requests (when it has at most ROUND_FLOATS); a recursive
 * doubling over the largest power of two p2 ≤ p processes (the others first fold theirs
 * into process r - p2 and get the result back at the end) leaves on every process the
 * least count (the agreement) and, when every process carried its bucket, the sum of the
 * bucket that count cuts, bitwise identical everywhere; else that bucket is summed by
 * the ring now. The bucket's requests are then complete; so are the large requests that
 * follow within the agreed count (the ring). Returns true once the stop request is
 * reached; *rc the first failure (the pending requests are then left to the broken
 * communicator). */
static bool run_round(struct mpi_comm *c, int *rc) {
    int p = c->base.size, r = c->base.rank, p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    int64_t m = c->taken, floats = 0, off = 0;
    int count = cut_bucket(c, m, &floats);
    hdr_set(c->xbuf, 0, m);
    hdr_set(c->xbuf, 1, floats <= ROUND_FLOATS);
    struct req *q = c->pending;
    for (int i = 0; i < count && floats <= ROUND_FLOATS; i++, q = q->next) {
        memcpy(c->xbuf + ROUND_HDR + off, q->data, (size_t)q->n * sizeof(float));
        off += q->n;
    }
    const float *res = c->xbuf;
    if (r >= p2) {
        *rc = round_msg(c, r - p2, carried_floats(c, m), r - p2);
        res = c->rbuf;
        if (*rc == MXC_OK)
            m = hdr_get(c->rbuf, 0);
    } else {
        if (r + p2 < p) {
            *rc = round_msg(c, -1, 0, r + p2);
            if (*rc == MXC_OK)
                m = combine(c, m, true);
        }
        for (int mask = 1; mask < p2 && *rc == MXC_OK; mask <<= 1) {
            int o = r ^ mask;
            *rc = round_msg(c, o, carried_floats(c, m), o);
            if (*rc == MXC_OK)
                m = combine(c, m, r < o);
        }
        if (*rc == MXC_OK && r + p2 < p)
            *rc = round_msg(c, r + p2, carried_floats(c, m), -1);
    }
    if (*rc != MXC_OK)
        return false;
    count = cut_bucket(c, m, &floats);
    if (count > 0 && !hdr_get(res, 1)) {
        *rc = run_bucket(c, c->pending, count, floats); /* the ring */
        if (*rc != MXC_OK)
            return false;
    }
    off = 0;
    for (int i = 0; i < count; i++) {
        q = c->pending;
        c->pending = q->next;
        if (hdr_get(res, 1))
            memcpy(q->data, res + ROUND_HDR + off, (size_t)q->n * sizeof(float));
        off += q->n;
        complete(q, MXC_OK, "");
    }
    c->done_count += count;
    int64_t small_max = c->fusion_bytes / (int64_t)sizeof(float);
    while (c->done_count < m && *rc == MXC_OK) {
        q = c->pending;
        if (q->kind == REQ_STOP)
            return true;
        if (q->n <= small_max)
            break; /* the next round's bucket */
        *rc = run_large(c, q);
        char msg[256];
        snprintf(msg, sizeof msg, "%s", *rc == MXC_OK ? "" : mxc_last_error());
        c->pending = q->next;
        c->done_count++;
        complete(q, *rc, msg);
    }
    if (!c->pending)
        c->pending_tail = NULL;
    return false;
}

static void *comm_main(void *arg) {
    struct mpi_comm *c = arg;
    long idle_ns = 0;
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* naps of 10-20 µs, not 60-70 µs */
    for (;;) {
        /* just idle: spin up to MXC__SPIN_NS for the next request before the first nap
         * (a step's keys come microseconds apart); later idle rounds only nap */
        if (idle_ns == 20000) {
            for (mxc__spin sp = {0, 0}; mxc__spin_more(&sp);) {
                if (atomic_load_explicit(&c->arrived, memory_order_acquire) != c->taken)
                    break;
                sched_yield();
            }
        }
        mxc__mutex_lock(&c->lock);
        if (idle_ns > 0 && !c->head && !c->broken) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += idle_ns;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&c->cond, &c->lock, &ts);
        }
        if (c->head) {
            idle_ns = 0;
            if (c->pending_tail)
                c->pending_tail->next = c->head;
            else
                c->pending = c->head;
            c->pending_tail = c->tail;
            c->head = c->tail = NULL;
        }
        c->taken = c->received;
        bool broken = c->broken;
        char msg[256];
        snprintf(msg, sizeof msg, "%s", c->broken_msg);
        mxc__mutex_unlock(&c->lock);

        if (broken) {
            bool stop = false;
            for (struct req *p = c->pending; p; p = p->next)
                stop = stop || p->kind == REQ_STOP;
            fail_pending(c, msg);
            if (stop)
                return NULL;
            mxc__mutex_lock(&c->lock);
            while (!c->head)
                mxc__cond_wait(&c->cond, &c->lock);
            mxc__mutex_unlock(&c->lock);
            continue;
        }

        int64_t before = c->done_count;
        int rc = MXC_OK;
        if (run_round(c, &rc)) {
            struct req *q = c->pending;
            c->pending = q->next;
            mxc__free(q);
            fail_pending(c, "dist_sync: the communicator was freed");
            return NULL;
        }
        /* sleep only with nothing to do: a request the others have yet to receive
         * means they are about to, and their round must find this one awake */
        if (rc == MXC_OK) {
            if (c->done_count == before && !c->pending)
                idle_ns = idle_ns == 0 ? 20000 : (idle_ns * 2 > 2000000 ? 2000000 : idle_ns * 2);
            else
                idle_ns = 0;
        }
        if (rc != MXC_OK) {
            snprintf(msg, sizeof msg, "%s", mxc_last_error());
            mxc__log(MXC_LOG_ERROR, "%s", msg);
            set_broken(c, msg);
        }
    }
}

static void enqueue(struct mpi_comm *c, struct req *q) {
    mxc__mutex_lock(&c->lock);
    if (c->tail)
        c->tail->next = q;
    else
        c->head = q;
    c->tail = q;
    c->received++;
    atomic_store_explicit(&c->arrived, c->received, memory_order_release);
    mxc__cond_signal(&c->cond);
    mxc__mutex_unlock(&c->lock);
}

static void comm_allreduce(struct mxc__kv_comm *base, int key, float *data, int64_t n,
                           mxc_engine_done *done) {
    struct mpi_comm *c = (struct mpi_comm *)base;
    if (base->size == 1 || n <= 0) {
        mxc_engine_complete(done, MXC_OK);
        return;
    }
    struct req *q = mxc__calloc(1, sizeof *q);
    if (!q) {
        mxc__error(MXC_ENOMEM, "dist_sync: out of memory queueing key %d", key);
        mxc_engine_complete(done, MXC_ENOMEM);
        return;
    }
    *q = (struct req){REQ_DATA, key, data, n, done, NULL};
    /* a broken communicator still queues: the thread fails it in order */
    enqueue(c, q);
}

static void comm_free(struct mxc__kv_comm *base) {
    struct mpi_comm *c = (struct mpi_comm *)base;
    if (!c)
        return;
    bool broken = false;
    if (c->thread_started) {
        enqueue(c, c->stop);
        c->stop = NULL; /* the thread frees it */
        mxc__thread_join(c->thread);
        broken = c->broken;
    }
    mxc__free(c->stop);
    mxc__mutex_lock(&mpi_lock);
    /* after a failure collectives may still be pending on them: freeing could block */
    if (!broken && !mpi_finalized) {
        if (c->data_comm != MPI_COMM_NULL)
            MPI_Comm_free(&c->data_comm);
        if (c->user_comm != MPI_COMM_NULL)
            MPI_Comm_free(&c->user_comm);
    }
    live_comms--;
    mxc__mutex_unlock(&mpi_lock);
    if (!broken) { /* else MPI may still write into them */
        mxc__free(c->bucket);
        mxc__free(c->block);
        mxc__free(c->xbuf);
        mxc__free(c->rbuf);
    }
    mxc__mutex_destroy(&c->lock);
    mxc__cond_destroy(&c->cond);
    mxc__free(c);
}

static const struct mxc__kv_comm_ops mpi_ops = {
    .check_keys = comm_check_keys,
    .broadcast = comm_broadcast,
    .allreduce = comm_allreduce,
    .barrier = comm_barrier,
    .free = comm_free,
};

static int64_t env_bytes(const char *name, long fallback, long lo) {
    long v = mxc__env_long(name, fallback);
    return v < lo ? lo : v;
}

int mxc__kv_comm_mpi(struct mxc__kv_comm **out) {
    *out = NULL;
    pthread_once(&mpi_once, mpi_start);
    if (mpi_status != MXC_OK)
        return mxc__error(mpi_status, "%s", mpi_message);
    int rc = MXC_OK;
    struct mpi_comm *c = mxc__calloc(1, sizeof *c);
    MXC_CHECK(c, MXC_ENOMEM, "dist_sync: out of memory");
    c->base.ops = &mpi_ops;
    c->data_comm = c->user_comm = MPI_COMM_NULL;
    mxc__mutex_init(&c->lock);
    mxc__cond_init(&c->cond);
    mxc__mutex_lock(&mpi_lock);
    live_comms++; /* until comm_free */
    mxc__mutex_unlock(&mpi_lock);
    c->stop = mxc__calloc(1, sizeof *c->stop);
    MXC_CHECK(c->stop, MXC_ENOMEM, "dist_sync: out of memory");
    c->stop->kind = REQ_STOP;
    c->timeout_s = (double)mxc__env_long("MXC_KV_TIMEOUT_S", 60);
    if (c->timeout_s <= 0)
        c->timeout_s = 60;
    c->fusion_bytes = env_bytes("MXC_KV_FUSION_BYTES", 64 << 10, 4);
    c->bucket_bytes = env_bytes("MXC_KV_BUCKET_BYTES", 1 << 20, 4);
    if (c->bucket_bytes > (int64_t)1 << 30) /* MPI counts in an int */
        c->bucket_bytes = (int64_t)1 << 30;
    if (c->fusion_bytes > c->bucket_bytes)
        c->fusion_bytes = c->bucket_bytes;
    if (c->bucket_bytes < c->fusion_bytes)
        c->bucket_bytes = c->fusion_bytes;
    c->chunk_bytes = env_bytes("MXC_KV_CHUNK_BYTES", 8 << 20, 4096);
    if (c->chunk_bytes > (int64_t)1 << 30)
        c->chunk_bytes = (int64_t)1 << 30;

    mxc__mutex_lock(&mpi_lock);
    int err = MPI_Comm_dup(MPI_COMM_WORLD, &c->data_comm);
    if (err == MPI_SUCCESS)
        err = MPI_Comm_dup(MPI_COMM_WORLD, &c->user_comm);
    if (err == MPI_SUCCESS) {
        MPI_Comm_set_errhandler(c->data_comm, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(c->user_comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(c->data_comm, &c->base.rank);
        MPI_Comm_size(c->data_comm, &c->base.size);
    }
    mxc__mutex_unlock(&mpi_lock);
    if (err != MPI_SUCCESS) {
        rc = mpi_failed(c, err, "MPI_Comm_dup");
        goto fail;
    }
    /* the fusion settings must agree: they decide the bucket boundaries */
    int64_t mine[3] = {c->fusion_bytes, c->bucket_bytes, c->chunk_bytes}, lo[3], hi[3];
    MPI_Request r;
    mxc__mutex_lock(&mpi_lock);
    err = MPI_Iallreduce(mine, lo, 3, MPI_INT64_T, MPI_MIN, c->user_comm, &r);
    mxc__mutex_unlock(&mpi_lock);
    MXC_CHECK(err == MPI_SUCCESS, MXC_EDEVICE, "dist_sync: MPI_Iallreduce failed");
    MXC_TRY(wait_request(c, &r, "start"));
    mxc__mutex_lock(&mpi_lock);
    err = MPI_Iallreduce(mine, hi, 3, MPI_INT64_T, MPI_MAX, c->user_comm, &r);
    mxc__mutex_unlock(&mpi_lock);
    MXC_CHECK(err == MPI_SUCCESS, MXC_EDEVICE, "dist_sync: MPI_Iallreduce failed");
    MXC_TRY(wait_request(c, &r, "start"));
    MXC_CHECK(memcmp(lo, hi, sizeof lo) == 0, MXC_EINVAL,
              "dist_sync: MXC_KV_FUSION_BYTES, MXC_KV_BUCKET_BYTES and MXC_KV_CHUNK_BYTES "
              "must be the same in every process");

    int64_t size = c->base.size;
    c->bucket_cap = (c->bucket_bytes / (int64_t)sizeof(float) + size) / size * size + size;
    c->block_cap = c->chunk_bytes / (int64_t)sizeof(float) / size + c->bucket_cap / size + 1;
    c->bucket = mxc__malloc((size_t)c->bucket_cap * sizeof(float));
    c->block = mxc__malloc((size_t)c->block_cap * sizeof(float));
    size_t xbytes = (size_t)(ROUND_FLOATS + ROUND_HDR) * sizeof(float);
    c->xbuf = mxc__malloc(xbytes);
    c->rbuf = mxc__malloc(xbytes);
    MXC_CHECK(c->bucket && c->block && c->xbuf && c->rbuf, MXC_ENOMEM,
              "dist_sync: out of memory for the buckets");
    if (size > 1) {
        MXC_TRY(mxc__thread_start(&c->thread, comm_main, c, "mxc-kv-mpi"));
        c->thread_started = true;
    }
    *out = &c->base;
    return MXC_OK;
fail:
    if (c)
        comm_free(&c->base);
    return rc;
}

#endif /* MXC_USE_MPI */
