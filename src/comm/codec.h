/* codec — how gradient values are written on the wire (--compress), PAPERS.md §2.
 *
 * A codec turns n fp32 values into codec_bytes(n) bytes and back. decode_add adds the decoded
 * values into an fp32 buffer: what a reduce step of the compressed ring does. Encoding works on
 * any n, so the ring can encode each of its segments independently. One file per codec; the
 * table is codec.c. Codecs are pure functions of their input: the same bytes on every rank.
 *
 * Worst error of one encode/decode of x (what tests/check_codec.c asserts):
 *   none   0
 *   t16    |x| * 2^-7        (keeps sign, exponent and 7 mantissa bits, truncates toward zero)
 *   fp16   |x| * 2^-11 + 2^-25 for |x| <= 65504 (round to nearest); larger values saturate
 *   q8     max|block| / 254  (q = round(127 x / s), s = max|x| over the block of `block` values)
 */
#ifndef DT_CODEC_H
#define DT_CODEC_H

#include <stddef.h>

#include "../engine/engine.h"

typedef struct dt_codec_desc dt_codec_desc;

typedef struct dt_codec {
    const dt_codec_desc *desc;
    int block; /* q8: values per scale; 0: one per vector encoded */
} dt_codec;

struct dt_codec_desc {
    const char *name;
    const char *help;
    int lossless; /* decode(encode(x)) == x */
    int wire;     /* the same codec on a backend's memory (engine/backend.h's DT_WIRE_*); 0: none */
    size_t (*bytes)(const dt_codec *c, size_t n);
    void (*encode)(const dt_codec *c, const float *x, size_t n, void *out);
    void (*decode)(const dt_codec *c, const void *in, size_t n, float *x);
    void (*decode_add)(const dt_codec *c, const void *in, size_t n, float *x);
};

/* NAME is none, t16, fp16 or q8; block applies to q8: values per scale (0: 256), or
 * DT_CODEC_PER_VECTOR: one scale for each vector encoded (Pipe-SGD's q8; block is then 0). */
#define DT_CODEC_PER_VECTOR (-1)
int codec_create(const char *name, int block, dt_codec *out);
const char *codec_list(void);
int codec_exists(const char *name);
static inline size_t codec_bytes(const dt_codec *c, size_t n) { return c->desc->bytes(c, n); }
static inline void codec_encode(const dt_codec *c, const float *x, size_t n, void *out)
{
    c->desc->encode(c, x, n, out);
}
static inline void codec_decode(const dt_codec *c, const void *in, size_t n, float *x) { c->desc->decode(c, in, n, x); }
static inline void codec_decode_add(const dt_codec *c, const void *in, size_t n, float *x)
{
    c->desc->decode_add(c, in, n, x);
}

/* How many values the fp16 codec has sent as +-65504 because they lay beyond it (infinities
 * included), in this process since it started, on any thread; encodings on a GPU are not counted */
unsigned long long codec_fp16_saturated(void);

#endif
