/*
 * tests/check_common.c — the common/ layer: the status table and thread-local last
 * error, the allocator hook and aligned allocation, the blocking queue (FIFO and
 * priority order, growth, close, many producers and consumers) and the object pool under
 * concurrent use. These helpers carry the engine, so their failures explain engine ones.
 */
#include "common/common.h"
#include "common/pool.h"
#include "common/queue.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

/* ---- Status table ------------------------------------------------------------------ */

static const struct {
    int code;
    const char *name, *desc;
} status_table[] = {
#define STATUS_ROW(n, v, d) {v, "MXC_" #n, d},
    MXC_STATUS_MAP(STATUS_ROW)
#undef STATUS_ROW
};

START_TEST(test_status_names) {
    for (size_t i = 0; i < MXC_ARRAY_SIZE(status_table); i++) {
        int code = status_table[i].code;
        ck_assert_str_eq(mxc_err_name(code), status_table[i].name);
        ck_assert_str_eq(mxc_strerror(code), status_table[i].desc);
        ck_assert_msg(code <= 0, "%s is positive", status_table[i].name);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(status_table[j].code != code, "%s and %s share %d", status_table[j].name,
                          status_table[i].name, code);
    }
    /* A few values spelled out, so a shifted table cannot pass by agreeing with itself. */
    ck_assert_int_eq(MXC_OK, 0);
    ck_assert_str_eq(mxc_err_name(-2), "MXC_ENOMEM");
    ck_assert_str_eq(mxc_strerror(MXC_ENOMEM), "out of memory");
    ck_assert_str_eq(mxc_err_name(MXC_EMISUSE), "MXC_EMISUSE");
    ck_assert_str_eq(mxc_err_name(MXC_ETYPE), "MXC_ETYPE");
    ck_assert_str_eq(mxc_strerror(MXC_OK), "success");

    const int unknown[] = {1, 42, -13, -1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(unknown); i++) {
        ck_assert_str_eq(mxc_strerror(unknown[i]), "unknown status code");
        ck_assert_str_eq(mxc_err_name(unknown[i]), "MXC_UNKNOWN");
    }
}
END_TEST

/* ---- Last error -------------------------------------------------------------------- */

START_TEST(test_last_error_basics) {
    mxc_clear_error();
    ck_assert_str_eq(mxc_last_error(), "");
    ck_assert_int_eq(mxc_last_error_code(), MXC_OK);

    ck_assert_int_eq(mxc__error(MXC_ESHAPE, "shape %d x %s", 3, "four"), MXC_ESHAPE);
    ck_assert_str_eq(mxc_last_error(), "shape 3 x four");
    ck_assert_int_eq(mxc_last_error_code(), MXC_ESHAPE);

    ck_assert_int_eq(mxc__error_set(MXC_EIO, "from elsewhere"), MXC_EIO);
    ck_assert_str_eq(mxc_last_error(), "from elsewhere");
    ck_assert_int_eq(mxc_last_error_code(), MXC_EIO);

    /* Re-recording the current message (its own buffer) keeps it. */
    ck_assert_int_eq(mxc__error_set(MXC_EINVAL, mxc_last_error()), MXC_EINVAL);
    ck_assert_str_eq(mxc_last_error(), "from elsewhere");

    ck_assert_int_eq(mxc__error_set(MXC_EINVAL, NULL), MXC_EINVAL);
    ck_assert_str_eq(mxc_last_error(), "");

    /* A message longer than the buffer is truncated, never overflowed. */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mxc__error(MXC_EINVAL, "%s", big);
    size_t n = strlen(mxc_last_error());
    ck_assert_msg(n > 100 && n < sizeof big - 1, "truncated length %zu", n);
    ck_assert_int_eq(strspn(mxc_last_error(), "x"), n);

    mxc_clear_error();
    ck_assert_str_eq(mxc_last_error(), "");
    ck_assert_int_eq(mxc_last_error_code(), MXC_OK);
}
END_TEST

struct error_thread {
    char seen_at_start[64];
    int code_at_start;
};

static void *error_thread_main(void *arg) {
    struct error_thread *t = arg;
    snprintf(t->seen_at_start, sizeof t->seen_at_start, "%s", mxc_last_error());
    t->code_at_start = mxc_last_error_code();
    mxc__error(MXC_EDEVICE, "set on the helper thread");
    return NULL;
}

/* A failure deep in a call is re-recorded once with the public call's name in front
 * (and context such as a node's), never twice; status codes pass through. */
START_TEST(test_error_wrap_names_the_call_once) {
    mxc__error(MXC_ESHAPE, "FullyConnected: weight has shape (5, 7) but (5, 6) is expected");
    ck_assert_int_eq(mxc__error_wrap(MXC_ESHAPE, "node %s", "fc1"), MXC_ESHAPE);
    ck_assert_int_eq(mxc__in_call("mxc_executor_bind", MXC_ESHAPE), MXC_ESHAPE);
    ck_assert_int_eq(mxc__in_call("mxc_executor_bind", MXC_ESHAPE), MXC_ESHAPE);
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_bind: node fc1: FullyConnected: weight has "
                                       "shape (5, 7) but (5, 6) is expected");
    ck_assert_int_eq(mxc_last_error_code(), MXC_ESHAPE);
    /* a prefix that only starts like the call's name is not the call's: another public
     * call named first (one used inside this one) gives way to it */
    mxc__error(MXC_EINVAL, "mxc_executor_bind_x: no");
    mxc__in_call("mxc_executor_bind", MXC_EINVAL);
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_bind: no");
    mxc_clear_error();
    ck_assert_int_eq(mxc__in_call("f", MXC_OK), MXC_OK);
    ck_assert_int_eq(mxc__in_call("f", 1), 1);
    ck_assert_str_eq(mxc_last_error(), "");
    /* NULL shapes: the empty shape, and no size */
    ck_assert_int_eq(mxc_shape_make(3, NULL).ndim, 0);
    ck_assert_int_eq(mxc_shape_size(NULL), -1);
    mxc_shape bad = {MXC_MAX_NDIM + 1, {1}};
    ck_assert_int_eq(mxc_shape_size(&bad), -1);
}
END_TEST

/* A caller passing on a callee's failure formats the last error into the last error:
 * "node %s: %s" with mxc_last_error() must give the callee's text behind the prefix, not
 * "node fc1: node fc1: cted: ..." (the buffer overwritten while it is read). */
START_TEST(test_error_formats_its_own_message) {
    const char *inner = "FullyConnected: weight has shape (5, 7) but (5, 6) is expected";
    mxc__error(MXC_ESHAPE, "%s", inner);
    ck_assert_int_eq(mxc__error(MXC_ESHAPE, "node %s: %s", "fc1", mxc_last_error()), MXC_ESHAPE);
    ck_assert_str_eq(mxc_last_error(),
                     "node fc1: FullyConnected: weight has shape (5, 7) but (5, 6) is expected");
    /* a message from the middle of the buffer */
    ck_assert_int_eq(mxc__error_set(MXC_EIO, mxc_last_error() + strlen("node fc1: ")), MXC_EIO);
    ck_assert_str_eq(mxc_last_error(), inner);
    ck_assert_int_eq(mxc_last_error_code(), MXC_EIO);
    /* as long as the buffer: cut, not overrun */
    char *big = malloc(4096);
    memset(big, 'x', 4095);
    big[4095] = '\0';
    mxc__error(MXC_EINVAL, "%s", big);
    mxc__error(MXC_EINVAL, "a: %s", mxc_last_error());
    ck_assert_uint_lt(strlen(mxc_last_error()), 4095);
    ck_assert(strncmp(mxc_last_error(), "a: xxx", 6) == 0);
    free(big);
}
END_TEST

/* mxc__error_wrap puts context in front of a callee's message; the message names the
 * public call the user made once: a callee's own public-call prefix goes. */
START_TEST(test_error_wrap_drops_an_inner_call) {
    mxc__error(MXC_ESHAPE, "mxc_nd_copy_to: src (2) and dst (3) differ");
    ck_assert_int_eq(mxc__error_wrap(MXC_ESHAPE, "mxc_executor_backward: head gradient %d", 0),
                     MXC_ESHAPE);
    ck_assert_str_eq(mxc_last_error(),
                     "mxc_executor_backward: head gradient 0: src (2) and dst (3) differ");
    mxc__error(MXC_ESHAPE, "node fc1: FullyConnected: weight has shape (3, 4)");
    mxc__error_wrap(MXC_ESHAPE, "mxc_executor_bind");
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_bind: node fc1: FullyConnected: weight has "
                                       "shape (3, 4)");
    mxc__error_wrap(MXC_ESHAPE, "mxc_executor_bind"); /* once, however often passed on */
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_bind: node fc1: FullyConnected: weight has "
                                       "shape (3, 4)");
    ck_assert_int_eq(mxc_last_error_code(), MXC_ESHAPE);
    mxc_clear_error(); /* a callee that recorded nothing: the code's description */
    ck_assert_int_eq(mxc__error_wrap(MXC_ENOMEM, "node %s", "fc1"), MXC_ENOMEM);
    char want[128];
    snprintf(want, sizeof want, "node fc1: %s", mxc_strerror(MXC_ENOMEM));
    ck_assert_str_eq(mxc_last_error(), want);
}
END_TEST

START_TEST(test_last_error_thread_local) {
    mxc__error(MXC_EFORMAT, "set on the main thread");
    struct error_thread t;
    memset(&t, 0x55, sizeof t);
    mxct_run_threads(1, error_thread_main, &t, sizeof t);
    ck_assert_str_eq(t.seen_at_start, "");
    ck_assert_int_eq(t.code_at_start, MXC_OK);
    ck_assert_str_eq(mxc_last_error(), "set on the main thread");
    ck_assert_int_eq(mxc_last_error_code(), MXC_EFORMAT);
}
END_TEST

/* ---- Allocator hook ---------------------------------------------------------------- */

/* Reads a counter (keeps assertion messages readable). */
static long count_of(atomic_long *counter) { return atomic_load(counter); }

START_TEST(test_allocator_hook_counts) {
    struct mxct_alloc_counts c;
    mxct_alloc_install(&c);

    void *a = mxc__malloc(100);
    void *b = mxc__calloc(10, 8);
    char *s = mxc__strdup("engine");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, "engine");
    for (int i = 0; i < 80; i++)
        ck_assert_int_eq(((unsigned char *)b)[i], 0);
    ck_assert_int_eq(count_of(&c.mallocs), 3);
    ck_assert_int_eq(count_of(&c.live), 3);

    memset(a, 7, 100);
    a = mxc__realloc(a, 10000);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(((unsigned char *)a)[99], 7);
    ck_assert_int_eq(count_of(&c.reallocs), 1);
    ck_assert_int_eq(count_of(&c.live), 3);

    void *al = mxc__aligned_alloc(256, 1000);
    ck_assert_ptr_nonnull(al);
    ck_assert_int_eq(count_of(&c.live), 4);

    mxc__free(a);
    mxc__free(b);
    mxc__free(s);
    mxc__aligned_free(al);
    mxc__free(NULL);
    mxc__aligned_free(NULL);
    ck_assert_int_eq(count_of(&c.live), 0);
    ck_assert_int_eq(count_of(&c.frees), 4);

    /* NULL restores the C library: nothing more reaches the counters. */
    mxct_alloc_uninstall();
    void *d = mxc__malloc(64);
    ck_assert_ptr_nonnull(d);
    mxc__free(d);
    ck_assert_int_eq(count_of(&c.mallocs), 4);
    ck_assert_int_eq(count_of(&c.frees), 4);
}
END_TEST

START_TEST(test_allocator_failure_is_null) {
    struct mxct_alloc_counts c;
    mxct_alloc_install(&c);
    mxct_alloc_fail_after(&c, 0);
    ck_assert_ptr_null(mxc__malloc(16));
    ck_assert_ptr_null(mxc__calloc(4, 4));
    ck_assert_ptr_null(mxc__strdup("x"));
    ck_assert_ptr_null(mxc__aligned_alloc(64, 16));
    ck_assert_int_eq(count_of(&c.failures), 4);

    /* A failed realloc leaves the block alone. */
    mxct_alloc_fail_after(&c, 1);
    char *p = mxc__malloc(8);
    ck_assert_ptr_nonnull(p);
    strcpy(p, "kept");
    ck_assert_ptr_null(mxc__realloc(p, 1 << 20));
    ck_assert_str_eq(p, "kept");
    mxc__free(p);

    /* calloc overflow is caught before the allocator is asked. */
    mxct_alloc_fail_after(&c, -1);
    long before = count_of(&c.mallocs);
    ck_assert_ptr_null(mxc__calloc(SIZE_MAX / 2, 4));
    ck_assert_int_eq(count_of(&c.mallocs), before);
    ck_assert_int_eq(count_of(&c.live), 0);
    mxct_alloc_uninstall();
}
END_TEST

START_TEST(test_aligned_alloc) {
    const size_t sizes[] = {0, 1, 7, 64, 100, 4097, 1 << 20};
    for (size_t align = sizeof(void *); align <= 4096; align *= 2) {
        for (size_t i = 0; i < MXC_ARRAY_SIZE(sizes); i++) {
            unsigned char *p = mxc__aligned_alloc(align, sizes[i]);
            ck_assert_msg(p != NULL, "aligned_alloc(%zu, %zu) failed", align, sizes[i]);
            ck_assert_msg((uintptr_t)p % align == 0, "%p not aligned to %zu", (void *)p, align);
            memset(p, 0xab, sizes[i]); /* the whole block is ours (ASan checks) */
            mxc__aligned_free(p);
        }
    }
    const size_t bad[] = {0, 3, 24, 100};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(bad); i++)
        ck_assert_msg(mxc__aligned_alloc(bad[i], 16) == NULL, "alignment %zu accepted", bad[i]);
    ck_assert_ptr_null(mxc__aligned_alloc(64, SIZE_MAX - 8));
}
END_TEST

/* ---- Queue ------------------------------------------------------------------------- */

#define ITEM(i)    ((void *)(uintptr_t)(i))
#define ITEM_ID(p) ((long)(uintptr_t)(p))

/* Pops one item without waiting, asserting there is one. */
static long must_pop(mxc__queue *q) {
    void *p = NULL;
    ck_assert_msg(mxc__queue_try_pop(q, &p), "queue unexpectedly empty");
    return ITEM_ID(p);
}

START_TEST(test_queue_fifo) {
    mxc__queue q;
    ck_assert_int_eq(mxc__queue_init(&q, false, false), MXC_OK);
    void *p;
    ck_assert(!mxc__queue_try_pop(&q, &p));

    /* Interleave so the ring wraps, then grow while wrapped. */
    long next_in = 1, next_out = 1;
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(mxc__queue_push(&q, ITEM(next_in++), 0), MXC_OK);
    for (int i = 0; i < 30; i++)
        ck_assert_int_eq(must_pop(&q), next_out++);
    for (int i = 0; i < 1000; i++) /* past 64 several times over */
        ck_assert_int_eq(mxc__queue_push(&q, ITEM(next_in++), i % 7), MXC_OK);
    for (int i = 0; i < 500; i++)
        ck_assert_int_eq(must_pop(&q), next_out++);
    for (int i = 0; i < 3000; i++)
        ck_assert_int_eq(mxc__queue_push(&q, ITEM(next_in++), 0), MXC_OK);
    while (next_out < next_in) {
        void *item = NULL;
        ck_assert(mxc__queue_pop(&q, &item)); /* non-empty: must not block */
        ck_assert_int_eq(ITEM_ID(item), next_out++);
    }
    ck_assert(!mxc__queue_try_pop(&q, &p));
    mxc__queue_destroy(&q);
}
END_TEST

START_TEST(test_queue_growth_exact_boundary) {
    /* 64 is the initial capacity: 64, 65 and 129 items all come back intact. */
    const int counts[] = {64, 65, 129};
    for (size_t c = 0; c < MXC_ARRAY_SIZE(counts); c++) {
        for (int by_prio = 0; by_prio <= 1; by_prio++) {
            mxc__queue q;
            ck_assert_int_eq(mxc__queue_init(&q, by_prio, false), MXC_OK);
            for (int i = 0; i < counts[c]; i++)
                ck_assert_int_eq(mxc__queue_push(&q, ITEM(i + 1), 0), MXC_OK);
            for (int i = 0; i < counts[c]; i++)
                ck_assert_int_eq(must_pop(&q), i + 1);
            void *p;
            ck_assert(!mxc__queue_try_pop(&q, &p));
            mxc__queue_destroy(&q);
        }
    }
}
END_TEST

START_TEST(test_queue_priority) {
    mxc__queue q;
    ck_assert_int_eq(mxc__queue_init(&q, true, false), MXC_OK);
    struct mxct_rng rng;
    mxct_rng_seed(&rng, 7);
    enum { N = 2000 };
    static int prio_of[N + 1];
    long pushed = 0, popped = 0;
    int last_prio = INT_MAX;
    long last_id = 0;
    /* Rounds of pushes then a partial drain, so the heap is exercised while it holds
     * items of several ages; within a drain, order is by priority, then push order. */
    while (pushed < N) {
        int burst = 1 + (int)mxct_rng_below(&rng, 200);
        for (int i = 0; i < burst && pushed < N; i++) {
            pushed++;
            prio_of[pushed] = (int)mxct_rng_below(&rng, 9) - 4; /* negatives too */
            ck_assert_int_eq(mxc__queue_push(&q, ITEM(pushed), prio_of[pushed]), MXC_OK);
        }
        last_prio = INT_MAX;
        last_id = 0;
        int drain = (int)mxct_rng_below(&rng, (uint32_t)(pushed - popped) + 1);
        for (int i = 0; i < drain; i++, popped++) {
            long id = must_pop(&q);
            int pr = prio_of[id];
            ck_assert_msg(pr <= last_prio, "priority %d after %d", pr, last_prio);
            if (pr == last_prio)
                ck_assert_msg(id > last_id, "FIFO broken among priority %d: %ld after %ld", pr, id,
                              last_id);
            last_prio = pr;
            last_id = id;
        }
    }
    last_prio = INT_MAX;
    last_id = 0;
    for (; popped < N; popped++) {
        long id = must_pop(&q);
        int pr = prio_of[id];
        ck_assert_msg(pr < last_prio || (pr == last_prio && id > last_id),
                      "item %ld (priority %d) after %ld (priority %d)", id, pr, last_id, last_prio);
        last_prio = pr;
        last_id = id;
    }
    void *p;
    ck_assert(!mxc__queue_try_pop(&q, &p));
    mxc__queue_destroy(&q);
}
END_TEST

struct blocked_consumer {
    mxc__queue *q;
    atomic_int started;
    bool got;
    uint64_t returned_ns;
};

static void *blocked_consumer_main(void *arg) {
    struct blocked_consumer *c = arg;
    atomic_store(&c->started, 1);
    void *p = NULL;
    c->got = mxc__queue_pop(c->q, &p);
    c->returned_ns = mxct_now_ns();
    return NULL;
}

/* `_i`: the consumer's spin count before sleeping (0 or a few hundred polls). */
START_TEST(test_queue_close_wakes_consumer) {
    mxc__queue q;
    ck_assert_int_eq(mxc__queue_init(&q, _i == 2, _i != 0), MXC_OK);
    struct blocked_consumer c = {.q = &q};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, blocked_consumer_main, &c), 0);
    ck_assert(mxct_wait_at_least(&c.started, 1, 5000));
    mxct_sleep_us(50 * 1000); /* long enough to be asleep in pop */
    uint64_t closed_ns = mxct_now_ns();
    mxc__queue_close(&q);
    pthread_join(t, NULL); /* a lost wake-up hangs here: the test's timeout reports it */
    ck_assert(!c.got);
    ck_assert_msg(c.returned_ns >= closed_ns, "pop returned before the queue was closed");

    /* A closed queue still takes items and drains them, then reports the end. */
    ck_assert_int_eq(mxc__queue_push(&q, ITEM(5), 0), MXC_OK);
    void *p = NULL;
    ck_assert(mxc__queue_pop(&q, &p));
    ck_assert_int_eq(ITEM_ID(p), 5);
    ck_assert(!mxc__queue_pop(&q, &p));
    mxc__queue_destroy(&q);
}
END_TEST

enum { MPMC_PRODUCERS = 4, MPMC_CONSUMERS = 4 };

struct mpmc {
    mxc__queue q;
    long per_producer;
    atomic_uchar *delivered; /* times each item was popped */
};

struct mpmc_producer {
    struct mpmc *m;
    int id;
};

struct mpmc_consumer {
    struct mpmc *m;
    long popped;
    long last_seq[MPMC_PRODUCERS]; /* each producer's items come out in its order */
    long order_errors;
};

static void *mpmc_producer_main(void *arg) {
    struct mpmc_producer *p = arg;
    for (long s = 0; s < p->m->per_producer; s++) {
        long item = (long)p->id * p->m->per_producer + s + 1;
        if (mxc__queue_push(&p->m->q, ITEM(item), 0) != MXC_OK)
            mxct_note("push failed: %s", mxc_last_error());
    }
    return NULL;
}

static void *mpmc_consumer_main(void *arg) {
    struct mpmc_consumer *c = arg;
    for (int i = 0; i < MPMC_PRODUCERS; i++)
        c->last_seq[i] = -1;
    void *p;
    while (mxc__queue_pop(&c->m->q, &p)) {
        long item = ITEM_ID(p) - 1;
        long total = c->m->per_producer * MPMC_PRODUCERS;
        if (item < 0 || item >= total) {
            mxct_note("foreign item %ld", item + 1);
            continue;
        }
        atomic_fetch_add(&c->m->delivered[item], 1);
        int prod = (int)(item / c->m->per_producer);
        long seq = item % c->m->per_producer;
        if (seq <= c->last_seq[prod])
            c->order_errors++;
        c->last_seq[prod] = seq;
        c->popped++;
    }
    return NULL;
}

static void *mpmc_producers_main(void *arg) {
    struct mpmc *m = arg;
    struct mpmc_producer prods[MPMC_PRODUCERS];
    for (int i = 0; i < MPMC_PRODUCERS; i++)
        prods[i] = (struct mpmc_producer){m, i};
    mxct_run_threads(MPMC_PRODUCERS, mpmc_producer_main, prods, sizeof prods[0]);
    mxc__queue_close(&m->q); /* consumers end once they drained everything */
    return NULL;
}

/* `_i` picks the queue: 0 FIFO sleeping at once, 1 FIFO spinning, 2 priority (all items
 * at one priority, so it must be FIFO too). */
START_TEST(test_queue_mpmc) {
    struct mpmc m;
    m.per_producer = mxct_scaled(25000, 5000); /* 4 x 25,000 = 100,000 items */
    long total = m.per_producer * MPMC_PRODUCERS;
    m.delivered = calloc((size_t)total, sizeof *m.delivered);
    ck_assert_ptr_nonnull(m.delivered);
    ck_assert_int_eq(mxc__queue_init(&m.q, _i == 2, _i == 1), MXC_OK);
    mxct_notes_reset();

    struct mpmc_consumer cons[MPMC_CONSUMERS];
    memset(cons, 0, sizeof cons);
    for (int i = 0; i < MPMC_CONSUMERS; i++)
        cons[i].m = &m;
    pthread_t producers;
    ck_assert_int_eq(pthread_create(&producers, NULL, mpmc_producers_main, &m), 0);
    mxct_run_threads(MPMC_CONSUMERS, mpmc_consumer_main, cons, sizeof cons[0]);
    pthread_join(producers, NULL);

    mxct_assert_no_notes();
    long popped = 0;
    for (int i = 0; i < MPMC_CONSUMERS; i++) {
        popped += cons[i].popped;
        ck_assert_msg(cons[i].order_errors == 0,
                      "consumer %d saw %ld items out of their producer's order", i,
                      cons[i].order_errors);
    }
    ck_assert_int_eq(popped, total);
    for (long i = 0; i < total; i++)
        ck_assert_msg(atomic_load(&m.delivered[i]) == 1, "item %ld delivered %d times", i + 1,
                      (int)atomic_load(&m.delivered[i]));
    void *p;
    ck_assert(!mxc__queue_try_pop(&m.q, &p));
    mxc__queue_destroy(&m.q);
    free(m.delivered);
}
END_TEST

/* ---- Object pool ------------------------------------------------------------------- */

enum { POOL_THREADS = 4, POOL_HELD = 64, POOL_OBJ_WORDS = 6 };

struct pool_worker {
    mxc__pool *pool;
    size_t alignment;
    int id;
    long rounds;
    _Atomic(uint64_t *) *exchange; /* objects handed to another thread to free */
    long corrupted, failed;
};

static uint64_t pool_tag(int thread, long round, int slot, int word) {
    return mxct_mix64(((uint64_t)thread << 48) ^ ((uint64_t)round << 16) ^ ((uint64_t)slot << 4) ^
                      (uint64_t)word);
}

/* Each round takes POOL_HELD objects, stamps them with what only this thread and round
 * can write, yields, checks the stamps, then frees them: half itself, half by swapping
 * through a shared slot so objects are also returned by threads that did not take them.
 * An object handed out twice while live gets stamped by two owners. */
static void *pool_worker_main(void *arg) {
    struct pool_worker *w = arg;
    uint64_t *held[POOL_HELD];
    for (long r = 0; r < w->rounds; r++) {
        for (int s = 0; s < POOL_HELD; s++) {
            held[s] = mxc__pool_alloc(w->pool);
            if (held[s] == NULL) {
                w->failed++;
                return NULL;
            }
            if ((uintptr_t)held[s] % w->alignment != 0)
                mxct_note("object %p not aligned to %zu", (void *)held[s], w->alignment);
            for (int k = 0; k < POOL_OBJ_WORDS; k++)
                held[s][k] = pool_tag(w->id, r, s, k);
        }
        sched_yield();
        for (int s = 0; s < POOL_HELD; s++)
            for (int k = 0; k < POOL_OBJ_WORDS; k++)
                if (held[s][k] != pool_tag(w->id, r, s, k))
                    w->corrupted++;
        for (int s = 0; s < POOL_HELD; s++) {
            uint64_t *obj = held[s];
            if (s % 2)
                obj = atomic_exchange(w->exchange, obj); /* free someone else's instead */
            if (obj)
                mxc__pool_free(w->pool, obj);
        }
    }
    return NULL;
}

/* `_i`: 0 for 16-byte, 1 for 64-byte (cache-line) alignment. */
START_TEST(test_pool_concurrent) {
    struct mxct_alloc_counts counts;
    mxct_alloc_install(&counts);
    mxct_notes_reset();
    size_t alignment = _i == 0 ? 16 : 64;
    mxc__pool pool;
    mxc__pool_init(&pool, POOL_OBJ_WORDS * sizeof(uint64_t), alignment);
    _Atomic(uint64_t *) exchange = NULL;
    struct pool_worker w[POOL_THREADS];
    for (int i = 0; i < POOL_THREADS; i++)
        w[i] = (struct pool_worker){&pool, alignment, i, mxct_scaled(4000, 500), &exchange, 0, 0};
    mxct_run_threads(POOL_THREADS, pool_worker_main, w, sizeof w[0]);
    uint64_t *last = atomic_load(&exchange);
    if (last)
        mxc__pool_free(&pool, last);
    mxct_assert_no_notes();
    for (int i = 0; i < POOL_THREADS; i++) {
        ck_assert_msg(w[i].failed == 0, "thread %d: pool_alloc returned NULL", i);
        ck_assert_msg(w[i].corrupted == 0,
                      "thread %d: %ld words of live objects overwritten (an object handed out "
                      "twice)",
                      i, w[i].corrupted);
    }
    /* Everything came back: the pool holds at most what four threads held at once
     * (plus page rounding), it did not grow per round. */
    ck_assert_msg(pool.capacity <=
                      4 * (size_t)(POOL_THREADS * POOL_HELD + 1) + 2 * pool.objects_per_page,
                  "pool grew to %zu objects for %d live at most", pool.capacity,
                  POOL_THREADS * POOL_HELD + 1);
    mxc__pool_destroy(&pool);
    ck_assert_int_eq(count_of(&counts.live), 0); /* pages go back through the hook */
    mxct_alloc_uninstall();
}
END_TEST

static int compare_ptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(test_pool_distinct_objects) {
    /* Sizes below a pointer, odd sizes and big ones, each alignment: objects are aligned
     * and never overlap, and the pool accounts for its pages. */
    const size_t sizes[] = {1, 8, 17, 100, 5000};
    const size_t aligns[] = {16, 32, 64};
    for (size_t z = 0; z < MXC_ARRAY_SIZE(sizes) * MXC_ARRAY_SIZE(aligns); z++) {
        size_t size = sizes[z % MXC_ARRAY_SIZE(sizes)];
        size_t align = aligns[z / MXC_ARRAY_SIZE(sizes)];
        mxc__pool pool;
        mxc__pool_init(&pool, size, align);
        ck_assert_uint_eq(mxc__pool_bytes(&pool), 0); /* allocates nothing up front */
        enum { N = 3000 };
        uintptr_t *objs = malloc(N * sizeof *objs);
        ck_assert_ptr_nonnull(objs);
        for (int i = 0; i < N; i++) {
            void *p = mxc__pool_alloc(&pool);
            ck_assert_ptr_nonnull(p);
            ck_assert_msg((uintptr_t)p % align == 0, "size %zu: %p not aligned to %zu", size, p,
                          align);
            memset(p, 0xcd, size);
            objs[i] = (uintptr_t)p;
        }
        ck_assert_uint_ge(mxc__pool_bytes(&pool), (size_t)N * size);
        /* free half, take them again: still distinct from the other half */
        for (int i = 0; i < N; i += 2)
            mxc__pool_free(&pool, (void *)objs[i]);
        for (int i = 0; i < N; i += 2)
            objs[i] = (uintptr_t)mxc__pool_alloc(&pool);
        qsort(objs, N, sizeof *objs, compare_ptr);
        for (int i = 1; i < N; i++)
            ck_assert_msg(objs[i] - objs[i - 1] >= size, "size %zu: objects %p and %p overlap",
                          size, (void *)objs[i - 1], (void *)objs[i]);
        free(objs);
        mxc__pool_destroy(&pool);
    }
}
END_TEST

/* ---- Waits sleep after a short spin (common/thread.h) -------------------------------- */

/* A waiter may spin for MXC__SPIN_NS (50 us); over a 60 ms wait it must use far less CPU
 * than the wait lasts (the old spinlock yielded in a loop and burned all of it). */
#define WAIT_MS        60
#define WAIT_CPU_LIMIT 4000000u /* ns: the spin, wake-ups, slack for a loaded machine */

struct lock_waiter {
    mxc__spinlock *lock;
    atomic_int started;
    uint64_t cpu_ns, wall_ns;
};

static void *take_lock(void *arg) {
    struct lock_waiter *w = arg;
    uint64_t cpu0 = mxct_thread_cpu_ns(), t0 = mxct_now_ns();
    atomic_store(&w->started, 1);
    mxc__spin_lock(w->lock);
    w->cpu_ns = mxct_thread_cpu_ns() - cpu0;
    w->wall_ns = mxct_now_ns() - t0;
    mxc__spin_unlock(w->lock);
    return NULL;
}

START_TEST(test_spinlock_contender_sleeps) {
    mxc__spinlock lock;
    mxc__spin_init(&lock);
    mxc__spin_lock(&lock);
    struct lock_waiter w = {.lock = &lock};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, take_lock, &w), 0);
    ck_assert(mxct_wait_at_least(&w.started, 1, 5000));
    mxct_sleep_us(WAIT_MS * 1000);
    mxc__spin_unlock(&lock);
    pthread_join(th, NULL);
    ck_assert_msg(w.wall_ns >= (WAIT_MS - 5) * 1000000u, "took the lock while it was held");
    ck_assert_msg(w.cpu_ns < WAIT_CPU_LIMIT, "%.2f ms of CPU waiting %d ms for a lock",
                  (double)w.cpu_ns / 1e6, WAIT_MS);
}
END_TEST

/* Mutual exclusion under contention, with sleeping contenders in the mix. */
struct lock_counter {
    mxc__spinlock lock;
    long value;
};

static void *count_under_lock(void *arg) {
    struct lock_counter *c = *(struct lock_counter **)arg;
    for (int i = 0; i < 100000; i++) {
        mxc__spin_lock(&c->lock);
        long v = c->value;
        if (i % 5000 == 0)
            mxct_sleep_us(100); /* held long enough that the others go to sleep */
        c->value = v + 1;
        mxc__spin_unlock(&c->lock);
    }
    return NULL;
}

START_TEST(test_spinlock_excludes) {
    struct lock_counter c = {.value = 0};
    mxc__spin_init(&c.lock);
    struct lock_counter *args[4] = {&c, &c, &c, &c};
    mxct_run_threads(4, count_under_lock, args, sizeof args[0]);
    ck_assert_int_eq(c.value, 400000);
    ck_assert_uint_eq(atomic_load(&c.lock.state), 0);
}
END_TEST

struct queue_waiter {
    mxc__queue *q;
    atomic_int started;
    uint64_t cpu_ns;
    void *got;
};

static void *pop_one(void *arg) {
    struct queue_waiter *w = arg;
    uint64_t cpu0 = mxct_thread_cpu_ns();
    atomic_store(&w->started, 1);
    ck_assert(mxc__queue_pop(w->q, &w->got));
    w->cpu_ns = mxct_thread_cpu_ns() - cpu0;
    return NULL;
}

START_TEST(test_queue_consumer_sleeps) {
    mxc__queue q;
    ck_assert_int_eq(mxc__queue_init(&q, false, true), MXC_OK);
    struct queue_waiter w = {.q = &q};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, pop_one, &w), 0);
    ck_assert(mxct_wait_at_least(&w.started, 1, 5000));
    mxct_sleep_us(WAIT_MS * 1000);
    int item;
    ck_assert_int_eq(mxc__queue_push(&q, &item, 0), MXC_OK);
    pthread_join(th, NULL);
    ck_assert_ptr_eq(w.got, &item);
    ck_assert_msg(w.cpu_ns < WAIT_CPU_LIMIT, "%.2f ms of CPU waiting %d ms on an empty queue",
                  (double)w.cpu_ns / 1e6, WAIT_MS);
    mxc__queue_destroy(&q);
}
END_TEST

/* ---- Files (common/file.c) ----------------------------------------------------------- */

/* Every loader reads through mxc__file_open_regular: a directory, a FIFO and /dev/zero are
 * MXC_EIO naming the path and what it is, at once (a FIFO's open must not wait for a
 * writer); a regular file comes back whole with a NUL after it. */
START_TEST(test_file_read_regular_only) {
    char *dir = mxct_temp_dir("mxc-dir-");
    char *fifo = mxct_temp_fifo("mxc-fifo-");
    const char *paths[] = {dir, fifo, "/dev/zero", "/nonexistent/x"};
    const char *says[] = {"is a directory, not a regular file", "is a FIFO, not a regular file",
                          "is a character device, not a regular file", "cannot open"};
    for (int i = 0; i < 4; i++) {
        char *data = (char *)1;
        size_t len = 7;
        ck_assert_int_eq(mxc__file_read("loader", paths[i], &data, &len), MXC_EIO);
        ck_assert_ptr_null(data);
        ck_assert_msg(strncmp(mxc_last_error(), "loader: ", 8) == 0 &&
                          strstr(mxc_last_error(), paths[i]) && strstr(mxc_last_error(), says[i]),
                      "%s", mxc_last_error());
    }
    char *path = mxct_temp_file("mxc-text-");
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("a,b\n1,2", f);
    fclose(f);
    char *data = NULL;
    size_t len = 0;
    ck_assert_int_eq(mxc__file_read("loader", path, &data, &len), MXC_OK);
    ck_assert_uint_eq(len, 7);
    ck_assert_str_eq(data, "a,b\n1,2");
    mxc__free(data);
    unlink(path);
    rmdir(dir);
    unlink(fifo);
    free(path);
    free(dir);
    free(fifo);
}
END_TEST

/* ---- Suite ------------------------------------------------------------------------- */

static Suite *common_suite(void) {
    Suite *s = suite_create("common");

    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_status_names);
    tcase_add_test(tc, test_last_error_basics);
    tcase_add_test(tc, test_error_wrap_names_the_call_once);
    tcase_add_test(tc, test_last_error_thread_local);
    tcase_add_test(tc, test_error_formats_its_own_message);
    tcase_add_test(tc, test_error_wrap_drops_an_inner_call);
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_add_test(tc, test_allocator_hook_counts);
    tcase_add_test(tc, test_allocator_failure_is_null);
    tcase_add_test(tc, test_aligned_alloc);
    suite_add_tcase(s, tc);

    tc = tcase_create("queue");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_test(tc, test_queue_fifo);
    tcase_add_test(tc, test_queue_growth_exact_boundary);
    tcase_add_test(tc, test_queue_priority);
    tcase_add_loop_test(tc, test_queue_close_wakes_consumer, 0, 3);
    tcase_add_loop_test(tc, test_queue_mpmc, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("pool");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_pool_concurrent, 0, 2);
    tcase_add_test(tc, test_pool_distinct_objects);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_set_timeout(tc, mxct_timeout(10)); /* a FIFO that blocked would hang here */
    tcase_add_test(tc, test_file_read_regular_only);
    suite_add_tcase(s, tc);

    tc = tcase_create("waits");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_test(tc, test_spinlock_contender_sleeps);
    tcase_add_test(tc, test_spinlock_excludes);
    tcase_add_test(tc, test_queue_consumer_sleeps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(common_suite()); }
