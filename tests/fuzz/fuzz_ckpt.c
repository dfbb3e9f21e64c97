/* fuzz_ckpt — checkpoint files (--resume): ckpt_open checks format, version and checksum. */
#include "fuzz.h"
#include "ckpt.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char path[256];
    fuzz_write("x.ckpt", data, n, path, sizeof path);
    st_file *f = NULL;
    dt_err_clear();
    int rc = ckpt_open(path, &f);
    fuzz_expect_message(rc);
    if (rc == 0) st_close(f);
    return 0;
}
