/*
 * kvstore/dist_mpi.c — the communicator of dist_sync stores over MPI
 * (kvstore/kvstore_impl.h). Without USE_MPI it only says how to get one.
 *
 * Drivers. The sums are driven by whoever holds drive_lock: the thread that issues a
 * request, at once, when it comes alone and nobody else is driving (drive_inline: no
 * hand-off to another thread and back, which cost a lone small key several times the
 * bare allreduce), for at most MXC__SPIN_NS of waiting for the other processes and one
 * bucket's transfer; else one communication thread per communicator, which also takes
 * over what an issuing thread leaves. The store's thread makes the collectives of
 * check_keys, broadcast and barrier on a duplicate of MPI_COMM_WORLD of their own, so the
 * two sequences of collectives never interleave differently on different processes.
 * Every MPI call goes through one process-wide lock, so MPI_THREAD_SERIALIZED is all this
 * needs, and every wait polls MPI_Testall bounded by MXC_KV_TIMEOUT_S (default 60 s): a
 * process that died makes the others fail with MXC_EDEVICE, never hang.
 *
 * Rounds. Fusion must cut the same buckets on every process, but which requests have
 * arrived when a driver looks depends on timing. So each round the processes agree on
 * the least, over the processes, of how many requests each has received, and work
 * through that many, which every process has, in order: bucket boundaries depend only on
 * the agreed count and the sizes of the requests, identical everywhere. The agreement
 * travels with the data: each process sends its count (in the message's tag) together
 * with the bucket its own count cuts at the head of its requests; the bucket a smaller
 * count cuts is a prefix of it, so the partners add the prefix the lesser count cuts
 * (combine). A round is a state (which exchange, which messages posted), so a driver can
 * leave it half done and another finish it. An idle communication thread repeats the
 * round with a growing nap (20 µs up to 2 ms), woken at once by a new request.
 *
 * Sum. MPI_Allreduce does not promise the same bits on every process. A round's bucket
 * (at most 32 KiB on every process, else the round only agrees and the bucket goes
 * through the ring after it) is summed by recursive doubling over point-to-point
 * messages (log2 p steps of one message each way; the ranks beyond the largest power of
 * two fold in first and get the result at the end): both partners of a step compute lower
 * + higher from the same two partial sums, so they hold the same bits, step after step. A
 * large request is a ring reduce-scatter, in which each block is added up by this file's
 * loop along the ring and finished by one process only, then a ring allgather that copies
 * the finished blocks to everyone: every process ends with the very bits that the block's
 * last owner computed.
 *
 * Units. Requests below MXC_KV_FUSION_BYTES (default 64 KiB) are copied one after the
 * other into a bucket of up to MXC_KV_BUCKET_BYTES (default 1 MiB), summed at once and
 * copied back (a bucket of one request is summed in place); larger ones are summed in
 * place in chunks of MXC_KV_CHUNK_BYTES (default 1 MiB) — a multiple of the number of
 * processes, the tail through the bucket buffer; one chunk's allgather travels with the
 * next one's reduce-scatter. The settings must agree across processes (checked when the
 * communicator starts).
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

#include <math.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

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

/* One exchange of a round: this process sends its round message to `to` and receives one
 * from `from` (either -1: none); then it adds the received partial sum to its own (`lower`:
 * its own comes first), or takes the received message as the round's result, or keeps
 * its own (a send only). */
enum exchange_then { THEN_KEEP, THEN_COMBINE, THEN_RESULT };
struct exchange {
    int to, from;
    enum exchange_then then;
    bool lower;
};

/* Exchanges of a round: a fold-in, log2 p steps, a send-back (recursive doubling). */
enum { MAX_EXCHANGES = 34 };

struct mpi_comm {
    struct mxc__kv_comm base;
    MPI_Comm data_comm;  /* the rings of the sums (whoever drives them) */
    MPI_Comm round_comm; /* the rounds' messages, their headers in the tags */
    MPI_Comm user_comm;  /* check_keys, broadcast, barrier */
    int64_t tag_max;     /* MPI_TAG_UB */
    double timeout_s;
    double ring_spin_s; /* how long a ring step polls before it yields (ring_step) */
    int64_t fusion_bytes, bucket_bytes, chunk_bytes;

    mxc__mutex lock;         /* the queue below, the broken state and `kick` */
    mxc__cond cond;          /* the thread naps on it */
    struct req *head, *tail; /* received, not yet taken by a driver */
    int64_t received;        /* requests received in all */
    atomic_llong queued;     /* requests received for the thread: its idle spin reads it */
    bool kick;               /* an inline driver left work for the thread */
    bool broken;             /* after a failure every request fails at once */
    char broken_msg[256];
    mxc__thread thread;
    bool thread_started;
    struct req *stop; /* taken at creation, so that free cannot fail */

    /* The driver's own: under drive_lock, held by the communication thread or by a thread
     * that issued a request and sums it at once (drive_inline). */
    mxc__mutex drive_lock;
    struct req *pending, *pending_tail; /* taken, not yet agreed and done */
    atomic_llong taken;                 /* requests taken from the queue in all */
    int64_t done_count;
    struct exchange plan[MAX_EXCHANGES]; /* this process's exchanges in every round */
    int plan_len;
    int step;          /* the next exchange of the round in progress; -1: none */
    int phase;         /* of that exchange: 0 not posted, 1 the first message awaited,
                              2 the rest */
    MPI_Request rq[4]; /* receive of the first part, sends of the two, receive of the
                              second */
    int got_tag;       /* the tag of the received first part */
    double posted_at;
    int64_t offer;         /* the round's request count: this process's, then the least */
    bool carry;            /* the round's messages carry the bucket `offer` cuts, in xbuf */
    float *bucket, *block; /* bucket_bytes (+ padding) and its share per process */
    float *xbuf, *rbuf;    /* a round's bucket: this process's, and a partner's */
    int64_t bucket_cap, block_cap;
};

static double now_s(void) { return (double)mxc__now_ns() * 1e-9; }

static const double spin_s = MXC__SPIN_NS * 1e-9;

/* What polling returns while the messages are still on their way. */
enum { NOT_YET = 1 };

/* What a poll does once its `stop` time has passed. */
enum past_stop {
    STOP_RETURN, /* returns NOT_YET: the caller does something else meanwhile */
    STOP_NAP,    /* naps 10 µs between polls */
    STOP_YIELD,  /* yields the core every 16 polls, for another thread that wants it */
};

/* Polls the `n` requests at `rq` until all are complete: MXC_OK, and the status of the
 * first in *first (when not NULL). Until `stop` it polls without a pause, as MPI's own
 * blocking waits do: OpenMPI moves a message on one host only inside its calls (the
 * receiver copies it), so a thread that napped or yielded between polls made a large
 * sum slower (a 1 MB key 0.59 against 0.90 of a bare allreduce's speed on 2 shared cores
 * with a yield at each poll); past `stop` as `then` says. MXC_EDEVICE when MPI reports a
 * failure or the communicator's timeout has passed since `since`. */
static int poll_requests(struct mpi_comm *c, MPI_Request *rq, int n, double since, double stop,
                         enum past_stop then, MPI_Status *first, const char *what) {
    double deadline = since + c->timeout_s;
    MPI_Status st[4];
    for (long polls = 0;; polls++) {
        int flag = 0;
        mxc__mutex_lock(&mpi_lock);
        int err = MPI_Testall(n, rq, &flag, st);
        mxc__mutex_unlock(&mpi_lock);
        if (err != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(err, s, &len);
            return mxc__error(MXC_EDEVICE, "dist_sync: rank %d: %s failed: %s", c->base.rank, what,
                              s);
        }
        if (flag) {
            if (first)
                *first = st[0];
            return MXC_OK;
        }
        if (polls % 16 != 0) { /* the clock every 16 polls, the first included */
            mxc__cpu_relax();
            continue;
        }
        double now = now_s();
        if (now > deadline)
            return mxc__error(MXC_EDEVICE,
                              "dist_sync: rank %d: no answer from the other processes "
                              "within %g s (a process died?) during %s",
                              c->base.rank, c->timeout_s, what);
        if (now < stop)
            continue;
        if (then == STOP_RETURN)
            return NOT_YET;
        if (then == STOP_YIELD) {
            sched_yield();
            continue;
        }
        /* the communicator's threads have a timer slack of 1 µs: not the default 60 */
        struct timespec ts = {0, 10000};
        nanosleep(&ts, NULL);
    }
}

static void set_broken(struct mpi_comm *c, const char *msg);

/* A failure breaks the communicator (a collective left pending would pair with the wrong
 * one later): every request from now on fails with its message. */
static int broken_by(struct mpi_comm *c, int rc) {
    if (rc < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", mxc_last_error());
        set_broken(c, msg);
        mxc__error(rc, "%s", msg);
    }
    return rc;
}

/* Waits for `r` (a collective of the store's thread), napping after MXC__SPIN_NS, up to
 * the communicator's timeout. */
static int wait_request(struct mpi_comm *c, MPI_Request *r, const char *what) {
    double now = now_s();
    return broken_by(c, poll_requests(c, r, 1, now, now + spin_s, STOP_NAP, NULL, what));
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

/* ---- Messages, and the ring ------------------------------------------------------- */

static void complete(struct req *q, int status, const char *msg) {
    if (status != MXC_OK)
        mxc__error(status, "%s", msg);
    if (q->done)
        mxc_engine_complete(q->done, status);
    mxc__free(q);
}

/* Takes the first pending request off the driver's list. */
static struct req *pop_pending(struct mpi_comm *c) {
    struct req *q = c->pending;
    c->pending = q->next;
    if (!c->pending)
        c->pending_tail = NULL;
    return q;
}

/* Posts on `comm` the send of `bytes` at `buf` to process `to` with `tag` (-1: none, *r
 * is then MPI_REQUEST_NULL). */
static int post_send(struct mpi_comm *c, MPI_Comm comm, int tag, const void *buf, int64_t bytes,
                     int to, MPI_Request *r) {
    *r = MPI_REQUEST_NULL;
    if (to < 0)
        return MXC_OK;
    mxc__mutex_lock(&mpi_lock);
    int err = MPI_Isend(buf, (int)bytes, MPI_BYTE, to, tag, comm, r);
    mxc__mutex_unlock(&mpi_lock);
    return err == MPI_SUCCESS ? MXC_OK : broken_by(c, mpi_failed(c, err, "MPI_Isend"));
}

/* Posts on `comm` the receive of up to `bytes` into `buf` from process `from`, any tag
 * (-1: none, as post_send). */
static int post_recv(struct mpi_comm *c, MPI_Comm comm, void *buf, int64_t bytes, int from,
                     MPI_Request *r) {
    *r = MPI_REQUEST_NULL;
    if (from < 0)
        return MXC_OK;
    mxc__mutex_lock(&mpi_lock);
    int err = MPI_Irecv(buf, (int)bytes, MPI_BYTE, from, MPI_ANY_TAG, comm, r);
    mxc__mutex_unlock(&mpi_lock);
    return err == MPI_SUCCESS ? MXC_OK : broken_by(c, mpi_failed(c, err, "MPI_Irecv"));
}

/* One message of a ring step: `n` floats from `out` to the next process, and `n` from the
 * previous one into `in`. */
struct transfer {
    const float *out;
    float *in;
    int64_t n;
};

/* One step of a ring: the `count` (1 or 2) transfers at once (MPI matches the messages
 * between two processes in the order they were posted). Every process of the ring is
 * there (the round before agreed on the work), so the wait is the transfers': it polls
 * without napping, which stalled the transfers (16 keys of 4 MB at 0.86-0.89 of a bare
 * allreduce's speed with 10 µs naps past MXC__SPIN_NS, 0.94-0.99 without), and without
 * yielding unless the host runs more processes than it has cores (ring_spin_s), as MPI's
 * own waits do: a yield every 16 polls past MXC__SPIN_NS handed the core to this
 * process's other threads (mpirun binds each process to one core) in mid-transfer, and
 * cost lone keys of 64 KB - 4 MB 2-8% of their time (the two alternated in one process). */
static int ring_step(struct mpi_comm *c, const struct transfer *t, int count) {
    int p = c->base.size, r = c->base.rank;
    double now = now_s();
    MPI_Request rq[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MXC_OK;
    for (int i = 0; i < count && rc == MXC_OK; i++)
        rc = post_recv(c, c->data_comm, t[i].in, t[i].n * (int64_t)sizeof(float), (r + p - 1) % p,
                       &rq[i]);
    for (int i = 0; i < count && rc == MXC_OK; i++)
        rc = post_send(c, c->data_comm, i, t[i].out, t[i].n * (int64_t)sizeof(float), (r + 1) % p,
                       &rq[count + i]);
    if (rc == MXC_OK)
        rc = broken_by(c, poll_requests(c, rq, 2 * count, now, now + c->ring_spin_s, STOP_YIELD,
                                        NULL, "allreduce"));
    return rc;
}

/* Sums the `len` floats at `buf` (a multiple of the number of processes p) across the
 * processes, in place, in chunks of at most `chunk` floats (a multiple of p). Each chunk
 * is cut into p blocks and summed by a ring reduce-scatter (block b is added up along the
 * ring, ending on process b - 1, in the same order for every run), then a ring allgather
 * that copies each finished block to everyone. Every block is summed by one process only,
 * so every process ends with the same bits; the additions are this file's own loop, not
 * MPI's. A chunk's allgather travels with the next chunk's reduce-scatter, step by step:
 * m chunks take (m + 1)(p - 1) steps instead of 2m(p - 1), each a synchronisation with
 * the neighbours. */
static int sum_ring(struct mpi_comm *c, float *buf, int64_t len, int64_t chunk) {
    int p = c->base.size, r = c->base.rank;
    float *prev = NULL; /* the chunk whose allgather is due, and its block size */
    int64_t prev_blk = 0;
    for (int64_t off = 0; off < len || prev; off += chunk) {
        float *cur = off < len ? buf + off : NULL;
        int64_t blk = cur ? (len - off < chunk ? len - off : chunk) / p : 0;
        for (int step = 0; step < p - 1; step++) {
            struct transfer t[2];
            int count = 0;
            int64_t add_b = (r - step - 1 + 2 * p) % p;
            if (prev) /* allgather: this process held the sum of block r + 1 */
                t[count++] =
                    (struct transfer){prev + (int64_t)((r + 1 - step + p) % p) * prev_blk,
                                      prev + (int64_t)((r - step + p) % p) * prev_blk, prev_blk};
            if (cur)
                t[count++] =
                    (struct transfer){cur + (int64_t)((r - step + p) % p) * blk, c->block, blk};
            int rc = ring_step(c, t, count);
            if (rc != MXC_OK)
                return rc;
            if (cur) {
                float *dst = cur + add_b * blk;
                const float *src = c->block;
                for (int64_t i = 0; i < blk; i++)
                    dst[i] += src[i];
            }
        }
        prev = cur;
        prev_blk = blk;
    }
    return MXC_OK;
}

static int64_t padded_block(struct mpi_comm *c, int64_t n) {
    return (n + c->base.size - 1) / c->base.size;
}

/* Sums the `n` floats the bucket buffer holds (n ≤ MXC_KV_BUCKET_BYTES), padded with zeros
 * to a multiple of the number of processes. */
static int sum_bucket(struct mpi_comm *c, int64_t n) {
    int64_t len = padded_block(c, n) * c->base.size;
    memset(c->bucket + n, 0, (size_t)(len - n) * sizeof(float));
    return sum_ring(c, c->bucket, len, len);
}

/* Sums one request in place: in chunks of chunk_bytes (a multiple of the number of
 * processes), the last few floats through the bucket. */
static int run_alone(struct mpi_comm *c, struct req *q) {
    int64_t size = c->base.size;
    int64_t chunk = c->chunk_bytes / (int64_t)sizeof(float) / size * size;
    int64_t len = q->n / size * size;
    int rc = sum_ring(c, q->data, len, chunk);
    if (rc != MXC_OK || len == q->n)
        return rc;
    /* fewer than `size` left: through the bucket */
    size_t tail = (size_t)(q->n - len) * sizeof(float);
    memcpy(c->bucket, q->data + len, tail);
    rc = sum_bucket(c, q->n - len);
    if (rc == MXC_OK)
        memcpy(q->data + len, c->bucket, tail);
    return rc;
}

/* Fails every pending request with `msg`; true when the stop request was among them. */
static bool fail_pending(struct mpi_comm *c, const char *msg) {
    bool stop = false;
    while (c->pending) {
        struct req *q = pop_pending(c);
        if (q->kind == REQ_STOP) {
            stop = true;
            mxc__free(q);
            continue;
        }
        complete(q, MXC_EDEVICE, msg);
    }
    return stop;
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

/* A round's message is the sender's bucket, when it carries it, in one or two parts; its
 * header travels in the tag of the first part (round_tag). On one host OpenMPI sends a
 * message of up to about 4,040 bytes eagerly and a larger one by a rendezvous, which took
 * a 4 KB key's round 1.8 times as long; so the first part holds at most ROUND_PART bytes
 * and the rest, if any, follows in a second message. A bucket of more than ROUND_FLOATS
 * (32 KiB) is summed by the ring after the round instead: on one host a single exchange of
 * more than OpenMPI's 32 KiB shared-memory fragment was slower than the ring's two
 * half-size steps (64 KiB: 0.41 against 0.53 GB/s). */
enum { ROUND_PART = 4000, ROUND_FLOATS = 8192 };

static bool is_small(const struct mpi_comm *c, const struct req *q) {
    return q->n * (int64_t)sizeof(float) <= c->fusion_bytes;
}

/* The round's work when `limit` requests (done ones included) are known to every process:
 * the longest run of pending requests from the head, within the limit, whose small ones
 * (at most MXC_KV_FUSION_BYTES each) fit one bucket of MXC_KV_BUCKET_BYTES (the first
 * always does). The small ones are fused into the bucket, one after the other, and the
 * large ones among them are summed alone. Returns how many requests, with the bucket's
 * size in *floats and how many it fuses in *fused (either may be NULL). The cut depends
 * only on the request sequence and `limit`, and the cut for a smaller limit — and so its
 * bucket — is a prefix of the cut for a larger one. */
static int cut_round(const struct mpi_comm *c, int64_t limit, int64_t *floats, int *fused) {
    int64_t bucket_max = c->bucket_bytes / (int64_t)sizeof(float), total = 0;
    int count = 0, small = 0;
    for (const struct req *p = c->pending;
         p && c->done_count + count < limit && p->kind == REQ_DATA; p = p->next, count++) {
        if (!is_small(c, p))
            continue;
        if (small > 0 && total + p->n > bucket_max)
            break;
        total += p->n;
        small++;
    }
    if (floats)
        *floats = total;
    if (fused)
        *fused = small;
    return count;
}

/* Copies the small ones among `count` requests from `q` into `buf`, one after the other,
 * or (`back`) from `buf` into them. */
static void bucket_copy(struct req *q, int count, const struct mpi_comm *c, float *buf, bool back) {
    for (int i = 0; i < count; i++, q = q->next) {
        if (!is_small(c, q))
            continue;
        size_t bytes = (size_t)q->n * sizeof(float);
        if (back)
            memcpy(q->data, buf, bytes);
        else
            memcpy(buf, q->data, bytes);
        buf += q->n;
    }
}

/* The tag of this process's round message: its offer above the requests every process has
 * done (done_count, the same everywhere during a round) times four, plus two when a
 * second part follows, plus one when it carries its bucket. round_begin keeps offers
 * within what a tag holds. */
static int round_tag(const struct mpi_comm *c, bool second) {
    return (int)((c->offer - c->done_count) * 4 + (second ? 2 : 0) + (c->carry ? 1 : 0));
}

/* Takes in the partner's round message (rbuf, its header in `tag`): the offer becomes the
 * least of the two; when both carry their buckets, the bucket that offer cuts — a prefix
 * of both — becomes the sum of the two, the lower rank's partial sum first. Both partners
 * compute the same bits. */
static void combine(struct mpi_comm *c, int tag, bool me_lower) {
    int64_t theirs = c->done_count + tag / 4, n = 0;
    if (theirs < c->offer)
        c->offer = theirs;
    c->carry = c->carry && (tag & 1);
    cut_round(c, c->offer, &n, NULL);
    float *x = c->xbuf;
    const float *y = c->rbuf;
    if (c->carry && me_lower)
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] + y[i];
    else if (c->carry)
        for (int64_t i = 0; i < n; i++)
            x[i] = y[i] + x[i];
}

/* This process's exchanges in a round: recursive doubling over the largest power of two
 * p2 ≤ p processes; each of the others first sends its message to process r - p2, which
 * adds it (its own first), and gets the finished round message back at the end. */
static void plan_rounds(struct mpi_comm *c) {
    int p = c->base.size, r = c->base.rank, p2 = 1, k = 0;
    while (p2 * 2 <= p)
        p2 *= 2;
    if (r >= p2) {
        c->plan[k++] = (struct exchange){r - p2, r - p2, THEN_RESULT, false};
    } else {
        if (r + p2 < p)
            c->plan[k++] = (struct exchange){-1, r + p2, THEN_COMBINE, true};
        for (int mask = 1; mask < p2; mask <<= 1)
            c->plan[k++] = (struct exchange){r ^ mask, r ^ mask, THEN_COMBINE, r < (r ^ mask)};
        if (r + p2 < p)
            c->plan[k++] = (struct exchange){r + p2, -1, THEN_KEEP, false};
    }
    c->plan_len = k;
    c->step = -1;
}

/* Begins a round: this process offers the requests it has taken (as many as a tag can
 * count: offering fewer only delays the rest) and the bucket that offer cuts at the head
 * of its pending requests, when it has at most ROUND_FLOATS. */
static void round_begin(struct mpi_comm *c) {
    int64_t most = c->done_count + (c->tag_max - 3) / 4, floats = 0;
    c->offer = atomic_load_explicit(&c->taken, memory_order_relaxed);
    if (c->offer > most)
        c->offer = most;
    int count = cut_round(c, c->offer, &floats, NULL);
    c->carry = floats <= ROUND_FLOATS;
    if (c->carry)
        bucket_copy(c->pending, count, c, c->xbuf, false);
    c->step = 0;
    c->phase = 0;
}

/* Posts the messages of the round's next exchange: the receive of the partner's first
 * part, and this process's message in one or two parts. */
static int exchange_post(struct mpi_comm *c, const struct exchange *e) {
    int64_t floats = 0;
    cut_round(c, c->offer, &floats, NULL);
    int64_t bytes = c->carry ? floats * (int64_t)sizeof(float) : 0;
    int64_t first = bytes < ROUND_PART ? bytes : ROUND_PART;
    c->rq[1] = c->rq[2] = c->rq[3] = MPI_REQUEST_NULL;
    int rc = post_recv(c, c->round_comm, c->rbuf, ROUND_PART, e->from, &c->rq[0]);
    if (rc == MXC_OK)
        rc = post_send(c, c->round_comm, round_tag(c, bytes > first), c->xbuf, first, e->to,
                       &c->rq[1]);
    if (rc == MXC_OK && bytes > first)
        rc = post_send(c, c->round_comm, 0, (const char *)c->xbuf + first, bytes - first, e->to,
                       &c->rq[2]);
    return rc;
}

/* Works through the round's exchanges in order: posts each and polls it up to `until`,
 * or up to MXC__SPIN_NS after posting it when that is later and the round carries
 * requests (an idle round is in no hurry). After the last, every process holds the least
 * offer of all (the agreement) and, when every process carried its bucket, the sum of the
 * bucket that offer cuts in xbuf, bitwise identical everywhere. Returns MXC_OK then,
 * NOT_YET while a partner's message is missing, or a failure. */
static int round_advance(struct mpi_comm *c, double until) {
    int64_t rest_cap = ROUND_FLOATS * (int64_t)sizeof(float) - ROUND_PART;
    while (c->step < c->plan_len) {
        const struct exchange *e = &c->plan[c->step];
        if (c->phase == 0) {
            int rc = exchange_post(c, e);
            if (rc != MXC_OK)
                return rc;
            c->phase = 1;
            c->posted_at = now_s();
            c->got_tag = 0;
        }
        double stop = until;
        if (c->pending && c->posted_at + spin_s > stop)
            stop = c->posted_at + spin_s;
        if (c->phase == 1) {
            /* the first part tells whether a second follows: receive that one only now (it
             * is on its way), and never wait for this process's sends first, which may
             * wait for the partner's receive of the second part */
            MPI_Status got;
            int rc = poll_requests(c, c->rq, 1, c->posted_at, stop, STOP_RETURN, &got, "allreduce");
            if (rc != MXC_OK)
                return broken_by(c, rc);
            if (e->from >= 0)
                c->got_tag = got.MPI_TAG;
            if (c->got_tag & 2)
                rc = post_recv(c, c->round_comm, (char *)c->rbuf + ROUND_PART, rest_cap, e->from,
                               &c->rq[3]);
            if (rc != MXC_OK)
                return rc;
            c->phase = 2;
        }
        int rc = poll_requests(c, c->rq, 4, c->posted_at, stop, STOP_RETURN, NULL, "allreduce");
        if (rc != MXC_OK)
            return broken_by(c, rc);
        c->phase = 0;
        c->step++;
        if (e->then == THEN_COMBINE) {
            combine(c, c->got_tag, e->lower);
        } else if (e->then == THEN_RESULT) {
            c->offer = c->done_count + c->got_tag / 4;
            c->carry = c->got_tag & 1;
            float *t = c->xbuf;
            c->xbuf = c->rbuf;
            c->rbuf = t;
        }
    }
    return MXC_OK;
}

/* Floats that ending the round (its exchanges done) sums by the ring: its agreed bucket
 * when the round did not carry it, and the large requests of its work. */
static int64_t ring_floats(const struct mpi_comm *c) {
    int64_t floats = 0;
    int count = cut_round(c, c->offer, &floats, NULL);
    int64_t total = c->carry ? 0 : floats;
    const struct req *q = c->pending;
    for (int i = 0; i < count; i++, q = q->next)
        total += is_small(c, q) ? 0 : q->n;
    return total;
}

enum { DRIVE_STOP = 2 };

/* Ends the round whose exchanges are done: the fused requests of the agreed work are
 * complete (summed by the round, else by the ring now: in place when there is one), then
 * its large requests are summed by the ring, in order. A small request that did not fit
 * the bucket waits for the next round. Returns MXC_OK, DRIVE_STOP once the stop request
 * is next, or the first failure (the work's requests fail with it; the pending ones are
 * left to the broken communicator). */
static int round_end(struct mpi_comm *c) {
    int64_t floats = 0;
    int fused = 0, rc = MXC_OK;
    c->step = -1;
    int count = cut_round(c, c->offer, &floats, &fused);
    struct req *work = count > 0 ? c->pending : NULL, *q = NULL;
    for (int i = 0; i < count; i++)
        q = pop_pending(c);
    if (q)
        q->next = NULL; /* the work's last */
    c->done_count += count;
    if (c->carry) {
        bucket_copy(work, count, c, c->xbuf, true);
    } else if (fused == 1) {
        for (q = work; !is_small(c, q); q = q->next) {
        }
        rc = run_alone(c, q);
    } else if (fused > 1) {
        bucket_copy(work, count, c, c->bucket, false);
        rc = sum_bucket(c, floats);
        if (rc == MXC_OK)
            bucket_copy(work, count, c, c->bucket, true);
    }
    char msg[256] = "";
    if (rc != MXC_OK)
        snprintf(msg, sizeof msg, "%s", mxc_last_error());
    /* the fused requests are done: complete them first, then sum the large ones */
    struct req *large = NULL, **tail = &large;
    while ((q = work) != NULL) {
        work = q->next;
        if (is_small(c, q)) {
            complete(q, rc, msg);
        } else {
            *tail = q;
            tail = &q->next;
        }
    }
    *tail = NULL;
    while ((q = large) != NULL) {
        large = q->next;
        if (rc == MXC_OK && (rc = run_alone(c, q)) != MXC_OK)
            snprintf(msg, sizeof msg, "%s", mxc_last_error());
        complete(q, rc, msg);
    }
    if (rc != MXC_OK)
        return rc;
    return c->done_count < c->offer && c->pending->kind == REQ_STOP ? DRIVE_STOP : MXC_OK;
}

/* Moves the queued requests to the driver's list. Returns true when the communicator
 * broke, with its message in msg. */
static bool take_queued(struct mpi_comm *c, char *msg, size_t size) {
    mxc__mutex_lock(&c->lock);
    if (c->head) {
        if (c->pending_tail)
            c->pending_tail->next = c->head;
        else
            c->pending = c->head;
        c->pending_tail = c->tail;
        c->head = c->tail = NULL;
    }
    atomic_store_explicit(&c->taken, c->received, memory_order_relaxed);
    bool broken = c->broken;
    if (broken)
        snprintf(msg, size, "%s", c->broken_msg);
    mxc__mutex_unlock(&c->lock);
    return broken;
}

/* Drives the rounds one step (holding drive_lock): begins a round when none is in
 * progress, advances it (round_advance, up to `until`) and ends it once its exchanges are
 * done — unless the ring would then sum more than *ring_budget floats (taken from it when
 * it does), which is left to the thread. Returns MXC_OK (a round ended), NOT_YET,
 * DRIVE_STOP, or a failure. */
static int drive(struct mpi_comm *c, double until, int64_t *ring_budget) {
    if (c->step < 0)
        round_begin(c);
    int rc = round_advance(c, until);
    if (rc != MXC_OK)
        return rc;
    int64_t ring = ring_floats(c);
    if (ring > *ring_budget)
        return NOT_YET;
    *ring_budget -= ring;
    return broken_by(c, round_end(c));
}

/* ---- Who drives: the communication thread, or the issuing thread at once ------------- */

/* Naps up to `ns` unless a request is queued, an inline driver left work, or the
 * communicator broke; with `spin_first`, first polls for a request for up to
 * MXC__SPIN_NS (a step's keys come microseconds apart). */
static void nap(struct mpi_comm *c, long ns, bool spin_first) {
    if (spin_first)
        for (mxc__spin sp = {0, 0}; mxc__spin_more(&sp);)
            if (atomic_load_explicit(&c->queued, memory_order_acquire) >
                atomic_load_explicit(&c->taken, memory_order_relaxed))
                break;
    mxc__mutex_lock(&c->lock);
    if (!c->head && !c->kick && !c->broken) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += ns;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&c->cond, &c->lock, &ts);
    }
    c->kick = false;
    mxc__mutex_unlock(&c->lock);
}

enum { IDLE_FIRST_NS = 20000, IDLE_MAX_NS = 2000000, WAIT_NAP_NS = 10000 };

/*
 * The communication thread: drives whatever no issuing thread drives — requests issued
 * in a series, rounds handed over, and idle rounds. When it has nothing to do it repeats
 * the round (a count of zero, no data) with a growing nap (20 µs up to 2 ms), woken at
 * once by a new request: these idle rounds keep answering the other processes while this
 * one is busy elsewhere, so a slow process never trips their timeout. While a partner's
 * message is missing it lets go of the rounds and polls every 10 µs, so an issuing
 * thread can take them over.
 */
static void *comm_main(void *arg) {
    struct mpi_comm *c = arg;
    long idle_ns = 0; /* the next idle nap; 0 while there is work */
    bool waiting = false;
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* naps of 10-20 µs, not 60-70 µs */
    for (;;) {
        if (waiting)
            nap(c, WAIT_NAP_NS, false);
        else if (idle_ns > 0)
            nap(c, idle_ns, idle_ns == IDLE_FIRST_NS);
        mxc__mutex_lock(&c->drive_lock);
        char msg[256];
        if (take_queued(c, msg, sizeof msg)) {
            bool stop = fail_pending(c, msg);
            mxc__mutex_unlock(&c->drive_lock);
            if (stop)
                return NULL;
            mxc__mutex_lock(&c->lock); /* only the stop request ends the thread */
            while (!c->head)
                mxc__cond_wait(&c->cond, &c->lock);
            mxc__mutex_unlock(&c->lock);
            continue;
        }
        int64_t before = c->done_count, unbounded = INT64_MAX;
        int rc = drive(c, now_s(), &unbounded);
        if (rc == DRIVE_STOP) {
            mxc__free(pop_pending(c));
            fail_pending(c, "dist_sync: the communicator was freed");
            mxc__mutex_unlock(&c->drive_lock);
            return NULL;
        }
        /* nap long only with nothing to do: a request the others have yet to receive
         * means they are about to, and their round must find this one awake */
        bool idle = c->done_count == before && !c->pending && rc >= 0;
        waiting = rc == NOT_YET && c->pending;
        mxc__mutex_unlock(&c->drive_lock);
        if (rc < 0)
            mxc__log(MXC_LOG_ERROR, "%s", mxc_last_error());
        if (idle)
            idle_ns = idle_ns == 0 ? IDLE_FIRST_NS
                                   : (idle_ns * 2 > IDLE_MAX_NS ? IDLE_MAX_NS : idle_ns * 2);
        else if (!waiting)
            idle_ns = 0;
    }
}

/* Appends `q` to the queue, under c->lock. */
static void enqueue_locked(struct mpi_comm *c, struct req *q) {
    if (c->tail)
        c->tail->next = q;
    else
        c->head = q;
    c->tail = q;
    c->received++;
}

/* Hands the queued requests to the thread. */
static void wake_thread_locked(struct mpi_comm *c) {
    atomic_store_explicit(&c->queued, c->received, memory_order_release);
    mxc__cond_signal(&c->cond);
}

static void enqueue(struct mpi_comm *c, struct req *q) {
    mxc__mutex_lock(&c->lock);
    enqueue_locked(c, q);
    wake_thread_locked(c);
    mxc__mutex_unlock(&c->lock);
}

/* Sums request number `seq` on the calling thread, which issued it and holds drive_lock
 * (no other thread was driving): a lone key is summed without waking the communication
 * thread, and completes on this thread. It drives rounds for up to MXC__SPIN_NS (a partner
 * later than that is waited for by the thread) and sums by the ring at most one bucket
 * (MXC_KV_BUCKET_BYTES); what is left goes to the thread. Unlocking drive_lock is its
 * last use of the communicator: the request's waiter may free it as soon as it is. */
static void drive_inline(struct mpi_comm *c, int64_t seq) {
    double until = now_s() + spin_s;
    int64_t ring_budget = c->bucket_bytes / (int64_t)sizeof(float);
    int rc = MXC_OK;
    char msg[256];
    for (bool first = true; rc == MXC_OK && c->done_count < seq && (first || now_s() < until);
         first = false)
        rc = take_queued(c, msg, sizeof msg) ? NOT_YET : drive(c, until, &ring_budget);
    if (rc != MXC_OK || c->pending || c->step >= 0) {
        mxc__mutex_lock(&c->lock);
        c->kick = true;
        wake_thread_locked(c);
        mxc__mutex_unlock(&c->lock);
    }
    mxc__mutex_unlock(&c->drive_lock);
}

static void comm_allreduce(struct mxc__kv_comm *base, int key, float *data, int64_t n, bool more,
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
    mxc__mutex_lock(&c->lock);
    enqueue_locked(c, q);
    int64_t seq = c->received;
    bool now = !more && !c->broken;
    if (!now)
        wake_thread_locked(c);
    mxc__mutex_unlock(&c->lock);
    if (!now)
        return;
    if (mxc__mutex_trylock(&c->drive_lock) == 0) {
        drive_inline(c, seq);
        return;
    }
    mxc__mutex_lock(&c->lock);
    wake_thread_locked(c);
    mxc__mutex_unlock(&c->lock);
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
        MPI_Comm *comms[3] = {&c->data_comm, &c->round_comm, &c->user_comm};
        for (int i = 0; i < 3; i++)
            if (*comms[i] != MPI_COMM_NULL)
                MPI_Comm_free(comms[i]);
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
    mxc__mutex_destroy(&c->drive_lock);
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
    c->data_comm = c->round_comm = c->user_comm = MPI_COMM_NULL;
    mxc__mutex_init(&c->lock);
    mxc__cond_init(&c->cond);
    mxc__mutex_init(&c->drive_lock);
    c->step = -1;
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
    /* chunks near a core's L2 cache (512 KiB on the development machine's EPYC) keep the
     * additions in cache: with 8 MiB chunks a 16 MB key was 0.92-1.20 of a bare allreduce's
     * speed in five runs, with 512 KiB 1.44-1.57 in four; 128 KiB chunks lost more to their
     * per-chunk cost than they gained. Since the chunks are pipelined (sum_ring), 1 MiB
     * beats 512 KiB by 2-6% from 1 MB to 16 MB, alternated in one process
     * (docs/kvstore_mpi.md has both sweeps) */
    c->chunk_bytes = env_bytes("MXC_KV_CHUNK_BYTES", 1 << 20, 4096);
    if (c->chunk_bytes > (int64_t)1 << 30)
        c->chunk_bytes = (int64_t)1 << 30;

    mxc__mutex_lock(&mpi_lock);
    MPI_Comm *comms[3] = {&c->data_comm, &c->round_comm, &c->user_comm};
    int err = MPI_SUCCESS;
    for (int i = 0; i < 3 && err == MPI_SUCCESS; i++) {
        err = MPI_Comm_dup(MPI_COMM_WORLD, comms[i]);
        if (err == MPI_SUCCESS)
            MPI_Comm_set_errhandler(*comms[i], MPI_ERRORS_RETURN);
    }
    if (err == MPI_SUCCESS) {
        MPI_Comm_rank(c->data_comm, &c->base.rank);
        MPI_Comm_size(c->data_comm, &c->base.size);
        int *tag_ub = NULL, flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
        c->tag_max = flag && tag_ub ? *tag_ub : 32767; /* the least MPI allows */
        MPI_Comm node;
        err = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        if (err == MPI_SUCCESS) {
            int local = 1;
            MPI_Comm_size(node, &local);
            MPI_Comm_free(&node);
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            c->ring_spin_s = cores > 0 && local > cores ? spin_s : c->timeout_s;
        }
    }
    mxc__mutex_unlock(&mpi_lock);
    if (err != MPI_SUCCESS) {
        rc = mpi_failed(c, err, "MPI_Comm_dup or MPI_Comm_split_type");
        goto fail;
    }
    plan_rounds(c);
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
    size_t xbytes = (size_t)ROUND_FLOATS * sizeof(float);
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
