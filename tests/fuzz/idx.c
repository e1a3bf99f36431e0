/*
 * tests/fuzz/idx.c — fuzzes the IDX reader and the iterator over it. The input holds the
 * iterator's options, then an images file and a labels file (raw or gzip):
 *
 *   byte 0     bit 0 flat, bit 1 shuffle, bit 2 round_batch, bits 3-5 batch_size - 1,
 *              bits 6-7 num_parts - 1 (the iterator reads the last part)
 *   bytes 1-2  length of the images file, little-endian (cut to what is there)
 *   then       the images file, then the labels file (the rest)
 *
 * Both files go to /dev/shm (the reader takes paths; fuzz_two_files). An iterator that
 * opens is run by fuzz_iterate.
 */
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *images, *labels;
    if (!fuzz_two_files(data, size, 1, &images, &labels))
        return 0;
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    int flat = data[0] & 1;
    p.shuffle = data[0] >> 1 & 1;
    p.round_batch = data[0] >> 2 & 1;
    p.batch_size = 1 + (data[0] >> 3 & 7);
    p.num_parts = 1 + (data[0] >> 6);
    p.part_index = p.num_parts - 1;
    p.prefetch = 1;

    mxc_data_iter *it = NULL;
    int rc = mxc_data_iter_create_idx(images, labels, flat, &p, &it);
    fuzz_iterate(rc, it);
    return 0;
}
