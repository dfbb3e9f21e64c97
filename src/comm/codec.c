/* The table of codecs, and `none` (fp32 as it is). */
#include "codec.h"

#include <stdio.h>
#include <string.h>

#include "../cpu.h"
#include "../registry.h"
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

static const dt_registry registry = DT_REGISTRY("codec", codecs);

int codec_exists(const char *name) { return registry_find(&registry, name) != NULL; }

int codec_create(const char *name, int block, dt_codec *out)
{
    if (!(out->desc = registry_get(&registry, name, "--compress"))) return -1;
    out->block = block == DT_CODEC_PER_VECTOR ? 0 : block > 0 ? block : 256;
    return 0;
}

const char *codec_list(void)
{
    static char buf[128];
    return buf[0] ? buf : registry_list(&registry, buf, sizeof buf);
}
