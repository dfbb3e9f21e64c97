/* fuzz_image — one image of a class folder: image_load_square (libjpeg-turbo or libpng, crop, resample), grey and RGB.
 */
#include "fuzz.h"
#include "data/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char path[128];
    uint8_t out[3 * 16 * 16];
    fuzz_write("x.JPEG", data, n, path, sizeof path);
    for (int ch = 1; ch <= 3; ch += 2) {
        dt_err_clear();
        fuzz_expect_message(image_load_square(path, ch, 16, out));
    }
    return 0;
}
