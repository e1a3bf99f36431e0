/*
 * executor/plan.c — the memory planner of plan.h: one walk over the nodes in execution
 * order with reader counts and a free list of blocks.
 */
#include "executor/plan.h"

#include "common/common.h"

#include <string.h>

struct planner {
    const struct mxc__plan_graph *g;
    struct mxc__plan *p;
    int *readers;   /* per entry: readers not yet run */
    bool *moved;    /* per entry: its block went on to an in-place output */
    int *free_list; /* blocks free for reuse */
    int num_free;
    int cap_blocks;
};

static int new_block(struct planner *s, size_t bytes) {
    struct mxc__plan *p = s->p;
    if (p->num_blocks == s->cap_blocks) {
        int cap = s->cap_blocks ? 2 * s->cap_blocks : 16;
        size_t *bb = mxc__realloc(p->block_bytes, sizeof(size_t) * (size_t)cap);
        if (bb == NULL)
            return -1;
        p->block_bytes = bb;
        int *lu = mxc__realloc(p->last_use, sizeof(int) * (size_t)cap);
        if (lu == NULL)
            return -1;
        p->last_use = lu;
        s->cap_blocks = cap;
    }
    p->block_bytes[p->num_blocks] = bytes;
    p->last_use[p->num_blocks] = -1;
    return p->num_blocks++;
}

/* The smallest free block that fits, else the largest grown to fit, else a new one. */
static int take_block(struct planner *s, size_t bytes) {
    const size_t *bb = s->p->block_bytes;
    int fit = -1, largest = -1;
    for (int i = 0; i < s->num_free; i++) {
        int b = s->free_list[i];
        if (bb[b] >= bytes && (fit < 0 || bb[b] < bb[s->free_list[fit]]))
            fit = i;
        if (largest < 0 || bb[b] > bb[s->free_list[largest]])
            largest = i;
    }
    int pick = fit >= 0 ? fit : largest;
    if (pick < 0)
        return new_block(s, bytes);
    int b = s->free_list[pick];
    s->free_list[pick] = s->free_list[--s->num_free];
    if (s->p->block_bytes[b] < bytes)
        s->p->block_bytes[b] = bytes;
    return b;
}

static void give_back(struct planner *s, int entry) {
    int b = s->p->block_of[entry];
    if (b >= 0 && !s->moved[entry])
        s->free_list[s->num_free++] = b;
}

static bool planned(const struct mxc__plan_graph *g, int e) { return !g->external[e]; }

/* Whether node k may write its in-place output over its in-place input. */
static bool can_share(const struct planner *s, const struct mxc__plan_node *n) {
    if (n->inplace_in < 0 || n->inplace_out < 0 || n->inplace_in >= n->num_inputs ||
        n->inplace_out >= n->num_outputs)
        return false;
    int in = n->inputs[n->inplace_in], out = n->outputs[n->inplace_out];
    if (!planned(s->g, in) || !planned(s->g, out) || s->p->block_of[in] < 0 || s->moved[in])
        return false;
    int uses = 0; /* this node must be the input's last reader */
    for (int i = 0; i < n->num_inputs; i++)
        uses += n->inputs[i] == in;
    return s->readers[in] == uses;
}

static int plan_node(struct planner *s, int k) {
    const struct mxc__plan_graph *g = s->g;
    const struct mxc__plan_node *n = &g->nodes[k];
    struct mxc__plan *p = s->p;
    for (int i = 0; i < n->num_inputs; i++) {
        int e = n->inputs[i];
        if (e < 0 || e >= g->num_entries)
            return mxc__error(MXC_EINVAL, "plan: node %d reads entry %d of %d", k, e,
                              g->num_entries);
        if (planned(g, e) && p->block_of[e] < 0)
            return mxc__error(MXC_EINVAL, "plan: node %d reads entry %d before it is written", k,
                              e);
    }
    bool share = can_share(s, n);
    for (int o = 0; o < n->num_outputs; o++) {
        int e = n->outputs[o];
        if (e < 0 || e >= g->num_entries)
            return mxc__error(MXC_EINVAL, "plan: node %d writes entry %d of %d", k, e,
                              g->num_entries);
        if (!planned(g, e) || p->block_of[e] >= 0)
            continue;
        if (share && o == n->inplace_out) {
            int in = n->inputs[n->inplace_in];
            int b = p->block_of[in];
            if (p->block_bytes[b] < g->bytes[e])
                p->block_bytes[b] = g->bytes[e];
            p->block_of[e] = b;
            p->inplace[e] = true;
            s->moved[in] = true;
            continue;
        }
        int b = take_block(s, g->bytes[e]);
        if (b < 0)
            return mxc__error(MXC_ENOMEM, "plan: out of memory");
        p->block_of[e] = b;
    }
    /* every block this node touches lives at least until it */
    for (int i = 0; i < n->num_inputs + n->num_outputs; i++) {
        int e = i < n->num_inputs ? n->inputs[i] : n->outputs[i - n->num_inputs];
        if (p->block_of[e] >= 0)
            p->last_use[p->block_of[e]] = k;
    }
    for (int i = 0; i < n->num_inputs; i++) {
        int e = n->inputs[i];
        if (planned(g, e) && --s->readers[e] == 0)
            give_back(s, e);
    }
    for (int o = 0; o < n->num_outputs; o++) { /* outputs nobody reads */
        int e = n->outputs[o];
        if (planned(g, e) && s->readers[e] == 0)
            give_back(s, e);
    }
    return MXC_OK;
}

/* a + b, or SIZE_MAX when that does not fit: a plan of huge entries is reported as too
 * big by its caller, never wrapped around to a small total */
static size_t add_sat(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }

int mxc__plan_make(const struct mxc__plan_graph *g, struct mxc__plan *out) {
    int rc = MXC_OK;
    int ne = g->num_entries;
    struct planner s = {.g = g, .p = out};
    memset(out, 0, sizeof *out);
    out->num_entries = ne;
    out->block_of = mxc__malloc(sizeof(int) * (size_t)(ne + 1));
    out->inplace = mxc__calloc((size_t)ne + 1, sizeof(bool));
    s.readers = mxc__calloc((size_t)ne + 1, sizeof(int));
    s.moved = mxc__calloc((size_t)ne + 1, sizeof(bool));
    s.free_list = mxc__malloc(sizeof(int) * (size_t)(ne + 1));
    MXC_CHECK(out->block_of && out->inplace && s.readers && s.moved && s.free_list, MXC_ENOMEM,
              "plan: out of memory");
    for (int e = 0; e < ne; e++)
        out->block_of[e] = -1;
    for (int k = 0; k < g->num_nodes; k++)
        for (int i = 0; i < g->nodes[k].num_inputs; i++) {
            int e = g->nodes[k].inputs[i];
            if (e >= 0 && e < ne)
                s.readers[e]++;
        }
    for (int k = 0; k < g->num_nodes; k++)
        MXC_TRY(plan_node(&s, k));
    for (int e = 0; e < ne; e++)
        if (out->block_of[e] >= 0)
            out->naive_bytes = add_sat(out->naive_bytes, g->bytes[e]);
    for (int b = 0; b < out->num_blocks; b++)
        out->planned_bytes = add_sat(out->planned_bytes, out->block_bytes[b]);
fail:
    mxc__free(s.readers);
    mxc__free(s.moved);
    mxc__free(s.free_list);
    if (rc != MXC_OK)
        mxc__plan_free(out);
    return rc;
}

void mxc__plan_free(struct mxc__plan *p) {
    mxc__free(p->block_of);
    mxc__free(p->inplace);
    mxc__free(p->block_bytes);
    mxc__free(p->last_use);
    memset(p, 0, sizeof *p);
}
