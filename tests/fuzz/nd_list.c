/*
 * tests/fuzz/nd_list.c — fuzzes the NDArray list (.params) loader: the input is a file
 * image. It goes through mxc_nd_load's own loader (mxc__nd_load_memory), and every image
 * that loads must round-trip: the arrays hold the records' bytes, and encoding the records
 * (version 2) and decoding that again gives the same records.
 */
#include "ndarray/nd_format.h"
#include "ndarray/ndarray_impl.h"
#include "tests/fuzz/fuzz_util.h"

#include <stdlib.h>
#include <string.h>

static bool same_record(const struct mxc__nd_record *a, const struct mxc__nd_record *b) {
    if ((a->name == NULL) != (b->name == NULL) || (a->name && strcmp(a->name, b->name) != 0))
        return false;
    if (a->shape.ndim != b->shape.ndim || a->nbytes != b->nbytes)
        return false;
    if (a->shape.ndim == 0)
        return true; /* none arrays carry nothing else */
    return memcmp(a->shape.dims, b->shape.dims, sizeof(int64_t) * (size_t)a->shape.ndim) == 0 &&
           a->dtype == b->dtype && a->dev_type == b->dev_type && a->dev_id == b->dev_id &&
           (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

/* Encodes the decoded records and decodes the result: it must give the same records. */
static void check_round_trip(const struct mxc__nd_record *records, size_t count) {
    void *buf = NULL;
    size_t len = 0, count2 = 0;
    struct mxc__nd_record *again = NULL;
    bool named = count > 0 && records[0].name != NULL;
    if (mxc__nd_encode(records, count, named, &buf, &len) != MXC_OK ||
        mxc__nd_decode(buf, len, &again, &count2) != MXC_OK || count2 != count)
        abort();
    for (size_t i = 0; i < count; i++)
        if (!same_record(&records[i], &again[i]))
            abort();
    mxc__nd_records_free(again, count2);
    mxc__free(buf);
}

/* The arrays loaded from the image must hold the records' shapes, dtypes and bytes. */
static void check_arrays(const struct mxc__nd_record *records, size_t count,
                         mxc_ndarray *const *arrays, char *const *names) {
    for (size_t i = 0; i < count; i++) {
        const struct mxc__nd_record *r = &records[i];
        mxc_shape s;
        if (mxc_nd_get_shape(arrays[i], &s) != MXC_OK || s.ndim != r->shape.ndim ||
            (r->name != NULL) != (names != NULL) || (names && strcmp(names[i], r->name) != 0))
            abort();
        if (r->nbytes == 0)
            continue;
        void *host = malloc(r->nbytes);
        if (host == NULL || mxc_nd_dtype(arrays[i]) != r->dtype ||
            mxc_nd_sync_copy_to_cpu(arrays[i], host, r->nbytes) != MXC_OK ||
            memcmp(host, r->data, r->nbytes) != 0)
            abort();
        free(host);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct mxc__nd_record *records = NULL;
    size_t count = 0, loaded = 0;
    mxc_ndarray **arrays = NULL;
    char **names = NULL;
    int decoded = mxc__nd_decode(data, size, &records, &count);
    fuzz_note("decode", decoded);
    int rc = mxc__nd_load_memory(data, size, "fuzz input", mxc_cpu(), &loaded, &arrays, &names);
    fuzz_note("load", rc);
    /* the loader decodes the same bytes; only a failed allocation may differ */
    if ((decoded == MXC_OK) != (rc == MXC_OK) && rc != MXC_ENOMEM)
        abort();
    if (decoded == MXC_OK) {
        check_round_trip(records, count);
        if (rc == MXC_OK) {
            if (loaded != count)
                abort();
            check_arrays(records, count, arrays, names);
        }
    }
    mxc_nd_list_free(loaded, arrays, names);
    mxc__nd_records_free(records, count);
    mxc_clear_error();
    return 0;
}
