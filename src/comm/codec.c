/* The table of codecs, and `none` (fp32 as it is). */
#include "codec.h"

#include <stdio.h>
#include <string.h>

#include "../cpu.h"
#include "../util.h"

static size_t none_bytes(const dt_codec *c, size_t n)
{
    (void)c;
    return n * sizeof(float);
}

static void none_encode(const dt_codec *c, const float *x, size_t n, void *out)
{
    (void)c;
    memcpy(out, x, n * sizeof(float));
}

static void none_decode(const dt_codec *c, const void *in, size_t n, float *x)
{
    (void)c;
    memcpy(x, in, n * sizeof(float));
}

DT_CLONES static void none_decode_add(const dt_codec *c, const void *in, size_t n, float *restrict x)
{
    (void)c;
    const float *restrict v = in;
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] += v[i];
}

const dt_codec_desc codec_none = {
    .name = "none",
    .help = "fp32 as it is (4 bytes per value)",
    .lossless = 1,
    .bytes = none_bytes,
    .encode = none_encode,
    .decode = none_decode,
    .decode_add = none_decode_add,
};

extern const dt_codec_desc codec_t16, codec_fp16, codec_q8;
static const dt_codec_desc *const codecs[] = {&codec_none, &codec_t16, &codec_fp16, &codec_q8};

int codec_exists(const char *name)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(codecs); i++)
        if (strcmp(codecs[i]->name, name) == 0) return 1;
    return 0;
}

int codec_create(const char *name, int block, dt_codec *out)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(codecs); i++)
        if (strcmp(codecs[i]->name, name) == 0) {
            out->desc = codecs[i];
            out->block = block > 0 ? block : 256;
            return 0;
        }
    return dt_fail("--compress: unknown codec '%s' (expected one of %s)", name, codec_list());
}

const char *codec_list(void)
{
    static char buf[128];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < DT_ARRAY_LEN(codecs); i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", codecs[i]->name);
    }
    return buf;
}
