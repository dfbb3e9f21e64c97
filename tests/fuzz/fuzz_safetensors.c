/* fuzz_safetensors — weight files (--load): st_parse, then every lookup a loader makes. */
#include "fuzz.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    st_file *f = NULL;
    dt_err_clear();
    int rc = st_parse(fuzz_copy(data, n, n), n, "fuzz.safetensors", &f);
    fuzz_expect_message(rc);
    if (rc != 0) return 0;
    char shape[256];
    for (int i = 0; i < f->n; i++) {
        if (st_find(f, f->e[i].name) != &f->e[i]) abort();
        st_shape_format(f->e[i].n_dims, f->e[i].shape, shape, sizeof shape);
    }
    for (int i = 0; i < f->n_meta; i++)
        if (!st_meta(f, f->meta_keys[i])) abort();
    st_close(f);
    return 0;
}
