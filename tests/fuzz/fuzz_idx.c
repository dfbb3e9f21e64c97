/* fuzz_idx — IDX files (MNIST family), raw or gzip: idx_parse, as images (3 dims) and as labels. */
#include "fuzz.h"
#include "data/formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    for (int want = 1; want <= 3; want += 2) {
        uint32_t dims[3];
        uint8_t *out = NULL;
        dt_err_clear();
        int rc = idx_parse("fuzz.idx", fuzz_copy(data, n, n), n, want, dims, &out);
        fuzz_expect_message(rc);
        free(out);
    }
    return 0;
}
