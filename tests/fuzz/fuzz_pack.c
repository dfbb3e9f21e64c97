/* fuzz_pack — packed image files (pack.c), opened as a pack-only ImageNet directory of 8x8 grey
 * images: the input is both the train and the val pack. Where the header's offsets lie inside the
 * input, the harness rewrites the header checksum so that mutations reach the checks behind it
 * (fnv below is a twin of pack.c's). */
#include "fuzz.h"
#include "data/data.h"

#define HEADER 4096

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int inside(uint64_t off, uint64_t len, uint64_t total) { return off <= total && len <= total - off; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char path[256];
    uint8_t *m = fuzz_copy(data, n, n);
    if (n >= HEADER) {
        uint64_t k = get64(m + 16), loff = get64(m + 40), noff = get64(m + 48), nb = get64(m + 56),
                 soff = get64(m + 88);
        if (k < n && inside(loff, 2 * k, n) && inside(noff, nb, n) && inside(soff, 8 * k, n)) {
            uint64_t h = fnv(1469598103934665603ull, m, 120);
            h = fnv(h, m + loff, 2 * k);
            h = fnv(h, m + noff, nb);
            h = fnv(h, m + soff, 8 * k);
            for (int i = 0; i < 8; i++) m[120 + i] = (uint8_t)(h >> 8 * i);
        }
    }
    fuzz_write("train-8-1.pack", m, n, path, sizeof path);
    fuzz_write("val-8-1.pack", m, n, path, sizeof path);
    free(m);
    dt_data_opts o = {.image_size = 8, .channels = 1, .threads = 1, .may_pack = 0};
    dt_dataset *ds = NULL;
    dt_err_clear();
    int rc = dataset_open_opts("imagenet", fuzz_tmpdir(), &o, &ds);
    fuzz_expect_message(rc);
    if (rc == 0) dataset_close(ds);
    return 0;
}
