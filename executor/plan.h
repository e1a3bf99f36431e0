/*
 * executor/plan.h — static memory planning for a graph run in a fixed order.
 *
 * The planner sees the graph only as data: entries (the arrays nodes produce and read,
 * with their sizes) and nodes in execution order (which entries each reads and writes,
 * and one optional in-place pair). It assigns every planned entry a block so that two
 * entries share a block only when their lifetimes do not overlap:
 *
 *   - walking the nodes in order, each entry's readers are counted down; an entry whose
 *     count reaches zero hands its block back to a free list;
 *   - a node's output takes its input's block (in place) when the operator allows it and
 *     this node is the input's last reader, else the smallest free block that fits, else
 *     the largest free block grown to fit, else a new block;
 *   - external entries (arguments, auxiliary states, gradients bound by the caller, graph
 *     outputs) are never planned and never reused.
 *
 * It also records, per block, the last node that touches it: the executor releases the
 * block's memory to the storage pool after that node in each pass, so the memory in use
 * never exceeds the plan. Internal to the executor; pure, single-threaded.
 */
#ifndef MXC_EXECUTOR_PLAN_H
#define MXC_EXECUTOR_PLAN_H

#include <stdbool.h>
#include <stddef.h>

/* One node as the planner sees it. */
struct mxc__plan_node {
    const int *inputs; /* entry ids read (an entry may appear more than once) */
    int num_inputs;
    const int *outputs; /* entry ids written */
    int num_outputs;
    int inplace_in, inplace_out; /* outputs[inplace_out] may take inputs[inplace_in]'s
                                    memory; -1: no in-place option */
};

struct mxc__plan_graph {
    int num_entries;
    const size_t *bytes;                /* per entry */
    const bool *external;               /* per entry: has its own memory, never planned */
    const struct mxc__plan_node *nodes; /* in execution order */
    int num_nodes;
};

struct mxc__plan {
    int num_entries;
    int *block_of; /* per entry: its block, or -1 (external, or never written) */
    bool *inplace; /* per entry: it took an input's block in place */
    int num_blocks;
    size_t *block_bytes;  /* per block */
    int *last_use;        /* per block: index of the last node that reads or writes it */
    size_t planned_bytes; /* sum of block_bytes (SIZE_MAX if it does not fit) */
    size_t naive_bytes;   /* sum of the planned entries' bytes, each its own block (same) */
};

/* Plans `g` into `*out` (free it with mxc__plan_free). Returns MXC_OK, MXC_EINVAL for an
 * entry id out of range or an entry read before any node writes it (unless external),
 * MXC_ENOMEM. */
int mxc__plan_make(const struct mxc__plan_graph *g, struct mxc__plan *out);

void mxc__plan_free(struct mxc__plan *p);

#endif /* MXC_EXECUTOR_PLAN_H */
