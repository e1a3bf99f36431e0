/*
 * examples/engine_demo.c — the dependency engine seen from C: the seed's two example
 * programs pushed as operations on engine variables, with the schedule each engine kind
 * chose printed as a timeline (which thread ran what, when).
 *
 *   B = A + 1; C = A + 2; D = B * C      B and C only read A: they may run together;
 *                                        D waits for both.
 *   A = 2; B = 2; B = A + B; C = A + 2; delete A
 *                                        the delete runs after both readers of A.
 *
 * Build: make examples; run: build/bin/example_engine_demo
 */
#include <mxc/engine.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_EVENTS 16

struct event {
    const char *name;
    double start_ms, end_ms;
    int worker;
};

static struct timespec origin;
static struct event events[MAX_EVENTS];
static int num_events; /* only the pushing thread appends; slots are per operation */

static double elapsed_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - origin.tv_sec) * 1e3 + (double)(t.tv_nsec - origin.tv_nsec) / 1e6;
}

/* One arithmetic step: out = a (op) b, taking `sleep_ms` to show overlap. */
struct step {
    double *out;
    const double *a, *b;
    double constant;
    char op; /* '=', '+', '*' */
    int sleep_ms;
    struct event *event;
};

static int run_step(const mxc_run_ctx *rctx, void *arg) {
    struct step *s = arg;
    s->event->start_ms = elapsed_ms();
    s->event->worker = rctx->worker;
    if (s->sleep_ms) {
        struct timespec d = {0, s->sleep_ms * 1000000L};
        nanosleep(&d, NULL);
    }
    double rhs = s->b ? *s->b : s->constant;
    switch (s->op) {
    case '=': *s->out = rhs; break;
    case '+': *s->out = *s->a + rhs; break;
    default: *s->out = *s->a * rhs; break;
    }
    s->event->end_ms = elapsed_ms();
    return MXC_OK;
}

static int free_value(const mxc_run_ctx *rctx, void *arg) {
    struct step *s = arg; /* reuse the event slot to show when the delete ran */
    s->event->start_ms = s->event->end_ms = elapsed_ms();
    s->event->worker = rctx->worker;
    return MXC_OK;
}

/* Pushes `s` reading `reads` and writing `write`. */
static int push_step(mxc_engine *eng, const char *name, struct step *s, mxc_var *const *reads,
                     int num_reads, mxc_var *write) {
    s->event = &events[num_events++];
    s->event->name = name;
    mxc_engine_op_desc d = {.fn = run_step,
                            .arg = s,
                            .const_vars = reads,
                            .num_const_vars = num_reads,
                            .mutable_vars = &write,
                            .num_mutable_vars = 1,
                            .name = name};
    return mxc_engine_push(eng, &d);
}

static void print_timeline(void) {
    for (int i = 0; i < num_events; i++)
        printf("    %-12s worker %2d  %7.2f ms -> %7.2f ms\n", events[i].name, events[i].worker,
               events[i].start_ms, events[i].end_ms);
}

#define CHECK(call)                                                                              \
    do {                                                                                         \
        int rc_ = (call);                                                                        \
        if (rc_ != MXC_OK) {                                                                     \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, mxc_err_name(rc_), mxc_last_error()); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static void first_program(mxc_engine *eng) {
    double A = 1, B = 0, C = 0, D = 0;
    mxc_var *a, *b, *c, *d;
    CHECK(mxc_engine_new_var(eng, &a));
    CHECK(mxc_engine_new_var(eng, &b));
    CHECK(mxc_engine_new_var(eng, &c));
    CHECK(mxc_engine_new_var(eng, &d));
    struct step sb = {&B, &A, NULL, 1, '+', 20, NULL};
    struct step sc = {&C, &A, NULL, 2, '+', 20, NULL};
    struct step sd = {&D, &B, &C, 0, '*', 0, NULL};
    mxc_var *bc[] = {b, c};
    CHECK(push_step(eng, "B = A + 1", &sb, &a, 1, b));
    CHECK(push_step(eng, "C = A + 2", &sc, &a, 1, c));
    CHECK(push_step(eng, "D = B * C", &sd, bc, 2, d));
    CHECK(mxc_engine_wait_for_var(eng, d)); /* the only point where we wait */
    printf("  D = %g (expected 6)\n", D);
    mxc_var *all[] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        CHECK(mxc_engine_delete_var(eng, all[i], NULL, NULL));
}

static void second_program(mxc_engine *eng) {
    double A = 0, B = 0, C = 0;
    mxc_var *a, *b, *c;
    CHECK(mxc_engine_new_var(eng, &a));
    CHECK(mxc_engine_new_var(eng, &b));
    CHECK(mxc_engine_new_var(eng, &c));
    struct step s1 = {&A, NULL, NULL, 2, '=', 0, NULL};
    struct step s2 = {&B, NULL, NULL, 2, '=', 0, NULL};
    struct step s3 = {&B, &A, &B, 0, '+', 10, NULL};
    struct step s4 = {&C, &A, NULL, 2, '+', 10, NULL};
    struct step del = {0};
    CHECK(push_step(eng, "A = 2", &s1, NULL, 0, a));
    CHECK(push_step(eng, "B = 2", &s2, NULL, 0, b));
    CHECK(push_step(eng, "B = A + B", &s3, &a, 1, b));
    CHECK(push_step(eng, "C = A + 2", &s4, &a, 1, c));
    del.event = &events[num_events++];
    del.event->name = "delete A";
    CHECK(mxc_engine_delete_var(eng, a, free_value, &del));
    CHECK(mxc_engine_wait_all(eng));
    printf("  B = %g, C = %g (expected 4 and 4)\n", B, C);
    CHECK(mxc_engine_delete_var(eng, b, NULL, NULL));
    CHECK(mxc_engine_delete_var(eng, c, NULL, NULL));
}

int main(void) {
    printf("mxc %s engine demo (worker -1: ran inline on the pushing thread)\n", mxc_version());
    for (int type = MXC_ENGINE_NAIVE; type <= MXC_ENGINE_PERDEVICE; type++) {
        mxc_engine *eng;
        CHECK(mxc_engine_create(type, NULL, &eng));
        printf("\n== %s engine\n", mxc_engine_type_name(type));
        clock_gettime(CLOCK_MONOTONIC, &origin);
        num_events = 0;
        first_program(eng);
        print_timeline();
        clock_gettime(CLOCK_MONOTONIC, &origin);
        num_events = 0;
        second_program(eng);
        print_timeline();
        mxc_engine_destroy(eng);
    }
    return 0;
}
