/*
 * examples/ndarray_basics.c — imperative array scripting from C: create arrays, compute
 * on them, take views, copy, save and load in MXNet's format, and check every error the
 * way a program should.
 *
 * Every call below returns at once: the arithmetic is pushed to the engine, which runs it
 * on its workers in dependency order. The program waits only when it reads results back
 * (mxc_nd_sync_copy_to_cpu) or asks to (mxc_nd_wait_all).
 *
 * Build: make examples; run: build/bin/example_ndarray_basics [file.params]
 */
#include <mxc/ndarray.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        int rc_ = (call);                                                            \
        if (rc_ != MXC_OK) {                                                         \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call, \
                    mxc_err_name(rc_), mxc_last_error());                            \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static void print_matrix(const char *name, const mxc_ndarray *a) {
    mxc_shape s;
    CHECK(mxc_nd_get_shape(a, &s));
    int64_t rows = s.ndim == 2 ? s.dims[0] : 1, cols = mxc_nd_size(a) / rows;
    float *v = malloc((size_t)mxc_nd_size(a) * sizeof *v);
    if (v == NULL)
        exit(1);
    CHECK(mxc_nd_sync_copy_to_cpu(a, v, (size_t)mxc_nd_size(a) * sizeof *v)); /* waits */
    printf("%s =\n", name);
    for (int64_t r = 0; r < rows; r++) {
        printf("   ");
        for (int64_t c = 0; c < cols; c++)
            printf(" %8.3f", v[r * cols + c]);
        printf("\n");
    }
    free(v);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "ndarray_basics.params";

    /* Create: a (2, 3) matrix from host data, and ones. */
    int64_t dims[2] = {2, 3};
    mxc_shape shape = mxc_shape_make(2, dims);
    const float host[6] = {1, 2, 3, 4, 5, 6};
    mxc_ndarray *x = NULL, *ones = NULL;
    CHECK(mxc_nd_create(&shape, MXC_FLOAT32, mxc_cpu(), 0, &x));
    CHECK(mxc_nd_sync_copy_from_cpu(x, host, sizeof host));
    CHECK(mxc_nd_ones(&shape, MXC_FLOAT32, mxc_cpu(), &ones));

    /* Compute: y = (x + 1) * 0.5, then y += ones in place. A NULL output is created. */
    mxc_ndarray *y = NULL;
    CHECK(mxc_nd_add(x, ones, &y));
    CHECK(mxc_nd_mul_scalar(y, 0.5f, &y)); /* in place: out is an input */
    CHECK(mxc_nd_add(y, ones, &y));
    print_matrix("y = (x + 1) * 0.5 + 1", y);

    /* Views share memory: row 1 of x, and x seen as (3, 2). */
    mxc_ndarray *row = NULL, *xt = NULL, *prod = NULL;
    CHECK(mxc_nd_at(x, 1, &row));
    CHECK(mxc_nd_mul_scalar(row, 10.0f, &row)); /* writes into x's second row */
    print_matrix("x after row 1 *= 10", x);
    int64_t tdims[2] = {3, 2};
    mxc_shape tshape = mxc_shape_make(2, tdims);
    CHECK(mxc_nd_reshape(x, &tshape, &xt));
    CHECK(mxc_nd_dot(x, xt, &prod)); /* (2, 3) x (3, 2) through BLAS */
    print_matrix("x . reshape(x, (3, 2))", prod);

    /* Random numbers: reproducible for a seed. */
    mxc_ndarray *noise = NULL, *total = NULL;
    CHECK(mxc_random_seed(42));
    CHECK(mxc_nd_create(&shape, MXC_FLOAT32, mxc_cpu(), 1, &noise));
    CHECK(mxc_nd_random_normal(noise, 0.0f, 1.0f));
    CHECK(mxc_nd_sum(noise, &total));
    print_matrix("normal noise", noise);
    print_matrix("its sum", total);

    /* Errors are values: a shape mismatch is reported, nothing is pushed. */
    mxc_ndarray *bad = NULL;
    int rc = mxc_nd_add(x, prod, &bad);
    printf("x + prod -> %s: %s\n", mxc_err_name(rc), mxc_last_error());

    /* Save in MXNet's format (mx.nd.load reads it) and load back. */
    mxc_ndarray *to_save[] = {x, y};
    const char *names[] = {"arg:x", "arg:y"};
    CHECK(mxc_nd_save(path, 2, to_save, names));
    size_t count;
    mxc_ndarray **loaded;
    char **loaded_names;
    CHECK(mxc_nd_load(path, mxc_cpu(), &count, &loaded, &loaded_names));
    printf("loaded %zu arrays from %s:\n", count, path);
    for (size_t i = 0; i < count; i++)
        print_matrix(loaded_names[i], loaded[i]);
    mxc_nd_list_free(count, loaded, loaded_names);

    /* Freeing is safe even with work pending: memory returns after the last reader. */
    mxc_ndarray *all[] = {x, ones, y, row, xt, prod, noise, total};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mxc_nd_free(all[i]);
    CHECK(mxc_nd_wait_all());
    return 0;
}
