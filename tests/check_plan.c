/*
 * tests/check_plan.c — the executor's memory planner on small graphs whose best plan is
 * known: chains reuse two blocks (one with in-place), an entry still read later is never
 * overwritten in place, external entries are never planned, sizes pick the best-fitting
 * free block or grow one, unread outputs are released at once, last uses are exact, and
 * malformed graphs are errors.
 */
#include "executor/plan.h"
#include "mxc/base.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <stdlib.h>

#define MAX_NODES   16
#define MAX_ENTRIES 32

/* A graph under construction: node k reads `in` and writes `out` (lists ending in -1). */
struct g {
    struct mxc__plan_node nodes[MAX_NODES];
    int ins[MAX_NODES][8], outs[MAX_NODES][8];
    size_t bytes[MAX_ENTRIES];
    bool external[MAX_ENTRIES];
    int num_nodes, num_entries;
};

static void node(struct g *g, const int *in, const int *out, int ip_in, int ip_out) {
    int k = g->num_nodes++;
    struct mxc__plan_node *n = &g->nodes[k];
    n->num_inputs = n->num_outputs = 0;
    for (; in[n->num_inputs] >= 0; n->num_inputs++)
        g->ins[k][n->num_inputs] = in[n->num_inputs];
    for (; out[n->num_outputs] >= 0; n->num_outputs++)
        g->outs[k][n->num_outputs] = out[n->num_outputs];
    n->inputs = g->ins[k];
    n->outputs = g->outs[k];
    n->inplace_in = ip_in;
    n->inplace_out = ip_out;
}

#define IN(...) ((const int[]){__VA_ARGS__, -1})
#define NONE    ((const int[]){-1})

static void entries(struct g *g, int n, size_t bytes) {
    g->num_entries = n;
    for (int e = 0; e < n; e++)
        g->bytes[e] = bytes;
}

static struct mxc__plan plan(const struct g *g) {
    struct mxc__plan_graph pg = {g->num_entries, g->bytes, g->external, g->nodes, g->num_nodes};
    struct mxc__plan p;
    CK_OK(mxc__plan_make(&pg, &p));
    return p;
}

/* x (external) -> e1 -> e2 -> e3 -> e4 -> y (external): two blocks alternate. */
START_TEST(test_chain_uses_two_blocks) {
    struct g g = {0};
    entries(&g, 6, 100);
    g.external[0] = g.external[5] = true;
    for (int k = 0; k < 5; k++)
        node(&g, IN(k), IN(k + 1), -1, -1);
    struct mxc__plan p = plan(&g);
    ck_assert_int_eq(p.num_blocks, 2);
    ck_assert_uint_eq(p.planned_bytes, 200);
    ck_assert_uint_eq(p.naive_bytes, 400);
    ck_assert_int_eq(p.block_of[0], -1);
    ck_assert_int_eq(p.block_of[5], -1);
    ck_assert_int_eq(p.block_of[1], p.block_of[3]);
    ck_assert_int_eq(p.block_of[2], p.block_of[4]);
    ck_assert_int_ne(p.block_of[1], p.block_of[2]);
    /* e1 and then e3 live in the first block; e3 is read last, by node 3 */
    ck_assert_int_eq(p.last_use[p.block_of[1]], 3);
    ck_assert_int_eq(p.last_use[p.block_of[2]], 4);
    mxc__plan_free(&p);
}
END_TEST

/* The same chain with in-place nodes runs in one block. */
START_TEST(test_inplace_chain_uses_one_block) {
    struct g g = {0};
    entries(&g, 6, 100);
    g.external[0] = g.external[5] = true;
    node(&g, IN(0), IN(1), -1, -1);
    for (int k = 1; k < 5; k++)
        node(&g, IN(k), IN(k + 1), 0, 0);
    struct mxc__plan p = plan(&g);
    ck_assert_int_eq(p.num_blocks, 1);
    for (int e = 1; e < 5; e++)
        ck_assert_int_eq(p.block_of[e], 0);
    ck_assert(!p.inplace[1]);
    ck_assert(p.inplace[2] && p.inplace[3] && p.inplace[4]);
    ck_assert_int_eq(p.last_use[0], 4);
    mxc__plan_free(&p);
}
END_TEST

/* e1 is read again after the in-place node: e2 must get its own block. */
START_TEST(test_inplace_refused_when_input_read_later) {
    struct g g = {0};
    entries(&g, 4, 64);
    g.external[0] = g.external[3] = true;
    node(&g, IN(0), IN(1), -1, -1);
    node(&g, IN(1), IN(2), 0, 0); /* would like to write e2 over e1 */
    node(&g, IN(1, 2), IN(3), -1, -1);
    struct mxc__plan p = plan(&g);
    ck_assert_int_ne(p.block_of[1], p.block_of[2]);
    ck_assert(!p.inplace[2]);
    mxc__plan_free(&p);
}
END_TEST

/* A node reading its input twice is still its last reader. */
START_TEST(test_inplace_with_repeated_input) {
    struct g g = {0};
    entries(&g, 4, 64);
    g.external[0] = g.external[3] = true;
    node(&g, IN(0), IN(1), -1, -1);
    node(&g, IN(1, 1), IN(2), 0, 0); /* x * x in place */
    node(&g, IN(2), IN(3), -1, -1);
    struct mxc__plan p = plan(&g);
    ck_assert_int_eq(p.block_of[1], p.block_of[2]);
    ck_assert_int_eq(p.num_blocks, 1);
    mxc__plan_free(&p);
}
END_TEST

/* Arguments and outputs are external: never planned, never written over in place. */
START_TEST(test_external_entries_never_planned) {
    struct g g = {0};
    entries(&g, 3, 64);
    g.external[0] = g.external[2] = true;
    node(&g, IN(0), IN(1), 0, 0); /* in place onto an argument: refused */
    node(&g, IN(1), IN(2), 0, 0); /* in place into an output: refused */
    struct mxc__plan p = plan(&g);
    ck_assert_int_eq(p.block_of[0], -1);
    ck_assert_int_eq(p.block_of[2], -1);
    ck_assert_int_eq(p.block_of[1], 0);
    ck_assert(!p.inplace[1]);
    ck_assert_int_eq(p.num_blocks, 1);
    mxc__plan_free(&p);
}
END_TEST

/* Diamond x -> a; a -> b; a -> c; (b, c) -> y: a, b, c need three blocks. */
START_TEST(test_diamond) {
    struct g g = {0};
    entries(&g, 5, 32);
    g.external[0] = g.external[4] = true;
    node(&g, IN(0), IN(1), -1, -1);
    node(&g, IN(1), IN(2), 0, 0);
    node(&g, IN(1), IN(3), 0, 0); /* a's last reader: c may take a's block */
    node(&g, IN(2, 3), IN(4), -1, -1);
    struct mxc__plan p = plan(&g);
    ck_assert_int_eq(p.num_blocks, 2);
    ck_assert(!p.inplace[2]);
    ck_assert(p.inplace[3]);
    ck_assert_int_eq(p.block_of[3], p.block_of[1]);
    mxc__plan_free(&p);
}
END_TEST

/* Sizes: the smallest free block that fits is chosen; when none fits the largest grows. */
START_TEST(test_best_fit_and_growth) {
    struct g g = {0};
    g.num_entries = 7;
    size_t sz[] = {8, 100, 300, 50, 50, 400, 8};
    for (int e = 0; e < 7; e++)
        g.bytes[e] = sz[e];
    g.external[0] = g.external[6] = true;
    node(&g, IN(0), IN(1, 2), -1, -1); /* e1 (100), e2 (300) */
    node(&g, IN(1, 2), IN(3), -1, -1); /* both freed after this; e3 (50) new */
    node(&g, IN(3), IN(4), -1, -1);    /* e4 (50): best fit is e1's 100 block */
    node(&g, IN(4), IN(5), -1, -1);    /* e5 (400): grows the largest free block (300) */
    node(&g, IN(5), IN(6), -1, -1);
    struct mxc__plan p = plan(&g);
    ck_assert_int_eq(p.block_of[4], p.block_of[1]);
    ck_assert_int_eq(p.block_of[5], p.block_of[2]);
    ck_assert_uint_eq(p.block_bytes[p.block_of[5]], 400);
    ck_assert_int_eq(p.num_blocks, 3);
    ck_assert_uint_eq(p.planned_bytes, 100 + 400 + 50);
    ck_assert_uint_eq(p.naive_bytes, 100 + 300 + 50 + 50 + 400);
    mxc__plan_free(&p);
}
END_TEST

/* An output nobody reads is released right after its node. */
START_TEST(test_unread_output_released_at_once) {
    struct g g = {0};
    entries(&g, 5, 64);
    g.external[0] = g.external[4] = true;
    node(&g, IN(0), IN(1, 2), -1, -1); /* e2 is never read (a hidden output) */
    node(&g, IN(1), IN(3), -1, -1);    /* e3 may take e2's block */
    node(&g, IN(3), IN(4), -1, -1);
    struct mxc__plan p = plan(&g);
    ck_assert_int_eq(p.block_of[3], p.block_of[2]);
    ck_assert_int_eq(p.num_blocks, 2);
    mxc__plan_free(&p);
}
END_TEST

START_TEST(test_malformed_graphs) {
    struct g g = {0};
    entries(&g, 3, 8);
    g.external[0] = true;
    node(&g, IN(1), IN(2), -1, -1); /* reads e1, which nothing wrote */
    struct mxc__plan_graph pg = {g.num_entries, g.bytes, g.external, g.nodes, g.num_nodes};
    struct mxc__plan p;
    CK_ERR(MXC_EINVAL, mxc__plan_make(&pg, &p));
    ck_assert_ptr_null(p.block_of);
    g.num_nodes = 0;
    node(&g, IN(0), IN(7), -1, -1); /* out of range */
    pg.num_nodes = g.num_nodes;
    CK_ERR(MXC_EINVAL, mxc__plan_make(&pg, &p));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, test_chain_uses_two_blocks);
    tcase_add_test(tc, test_inplace_chain_uses_one_block);
    tcase_add_test(tc, test_inplace_refused_when_input_read_later);
    tcase_add_test(tc, test_inplace_with_repeated_input);
    tcase_add_test(tc, test_external_entries_never_planned);
    tcase_add_test(tc, test_diamond);
    tcase_add_test(tc, test_best_fit_and_growth);
    tcase_add_test(tc, test_unread_output_released_at_once);
    tcase_add_test(tc, test_malformed_graphs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
