/*
 * tests/fuzz/csv.c — fuzzes the CSV reader and the iterator over it. The input holds the
 * iterator's options, then a data file and a labels file:
 *
 *   byte 0     bits 0-2 data values per line - 1, bit 3 data shape (1, w) instead of (w),
 *              bits 4-5 label values per line (0: no labels file), bit 6 shuffle,
 *              bit 7 round_batch
 *   byte 1     bits 0-2 batch_size - 1, bits 3-4 num_parts - 1 (the last part is read)
 *   bytes 2-3  length of the data file, little-endian (cut to what is there)
 *   then       the data file, then the labels file (the rest)
 *
 * Both files go to /dev/shm (the reader takes paths; fuzz_two_files). An iterator that
 * opens is run by fuzz_iterate.
 */
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *data_csv, *label_csv;
    if (!fuzz_two_files(data, size, 2, &data_csv, &label_csv))
        return 0;
    int64_t width = 1 + (data[0] & 7), label_width = data[0] >> 4 & 3;
    mxc_shape data_shape = {.ndim = 1, .dims = {width}};
    if (data[0] & 8)
        data_shape = (mxc_shape){.ndim = 2, .dims = {1, width}};
    mxc_shape label_shape = {.ndim = 1, .dims = {label_width}};
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.shuffle = data[0] >> 6 & 1;
    p.round_batch = data[0] >> 7;
    p.batch_size = 1 + (data[1] & 7);
    p.num_parts = 1 + (data[1] >> 3 & 3);
    p.part_index = p.num_parts - 1;
    p.prefetch = 1;

    mxc_data_iter *it = NULL;
    int rc = mxc_data_iter_create_csv(data_csv, &data_shape, label_width ? label_csv : NULL,
                                      &label_shape, &p, &it);
    fuzz_iterate(rc, it);
    return 0;
}
