/* fuzz_png — one image of a PNG class folder: png_load_square (libpng, crop, resample), grey and RGB. */
#include "fuzz.h"
#include "data/pngdir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char path[128];
    uint8_t out[3 * 16 * 16];
    fuzz_write("x.png", data, n, path, sizeof path);
    for (int ch = 1; ch <= 3; ch += 2) {
        dt_err_clear();
        fuzz_expect_message(png_load_square(path, ch, 16, out));
    }
    return 0;
}
