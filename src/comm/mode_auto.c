/* --mode auto — the mode and codec for this run, chosen by the timing model (PAPERS.md §3).
 *
 * The candidates (--auto-allow, "MODE[+CODEC]" each) are D-Sync and Pipe-SGD with any codec, and
 * the sparse and ternary modes (topk, gtopk, csc with its codec, terngrad). D-Sync and Pipe-SGD are
 * priced from the measured compute time, the start-up probe and their codec's gamma; the others
 * also by their calibrate hook, which times their selection, merging, packing or ternarizing on
 * scratch data of the arena's size. PS-Sync is not a candidate: its ranks' roles (servers that do
 * not compute) and the data's split among workers are fixed before compute can be timed.
 *
 * The list is in order of preference (the default: exact D-Sync first, then D-Sync with ever
 * coarser codecs, then Pipe-SGD's stale gradients; sparse modes change what training sees and run
 * only when listed): the first candidate predicted within AUTO_MARGIN of the fastest runs. 15% is
 * the accuracy the model is held to, so a gain it cannot tell from its error never buys more
 * approximation. On shared memory the candidates lie close together (2 ranks, mlp, batch 100:
 * predicted 1.80-1.99 ms, measured 2.31-2.74 ms); on 1 Gbit/s links the codecs are 2-4x faster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "mode.h"

#define AUTO_MARGIN 0.15

static const char *const rankable[] = {"dsync", "pipesgd", "topk", "gtopk", "csc", "terngrad"};
#define RANKABLE "dsync, pipesgd, topk, gtopk, csc or terngrad"

static int parse_one(const char *s, size_t len, dt_auto_cand *c)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return dt_fail("--auto-allow: expected MODE or MODE+CODEC, found '%.*s'", (int)len, s);
    memcpy(buf, s, len);
    buf[len] = 0;
    char *plus = strchr(buf, '+');
    if (plus && !plus[1]) return dt_fail("--auto-allow: expected a codec after the '+' of '%s'", buf);
    if (plus) *plus = 0;
    int ok = 0;
    for (size_t i = 0; i < DT_ARRAY_LEN(rankable); i++) ok |= strcmp(buf, rankable[i]) == 0;
    const dt_mode_desc *m = mode_find(buf);
    if (!ok) {
        if (m)
            return dt_fail("--auto-allow: --mode auto cannot rank '%s' (its servers and their workers are set before "
                           "compute can be timed; the candidates: " RANKABLE ")",
                           buf);
        return dt_fail("--auto-allow: unknown mode '%s' (expected " RANKABLE ", with +CODEC for a codec)", buf);
    }
    if (plus && !mode_reads(m, "compress"))
        return dt_fail("--auto-allow: %s takes no codec (it encodes gradients its own way), found '%s+%s'", buf, buf,
                       plus + 1);
    const char *own = m->default_compress ? m->default_compress : "none", *codec = plus ? plus + 1 : own;
    dt_codec tmp;
    if (codec_create(codec, 0, &tmp) != 0) return dt_fail_prefix("--auto-allow %.*s", (int)len, s);
    c->mode = m;
    snprintf(c->codec, sizeof c->codec, "%s", codec);
    /* named by the mode alone where the codec is its default: dsync+none is dsync, csc+fp16 is csc */
    int named = strcmp(codec, own) != 0;
    snprintf(c->name, sizeof c->name, "%s%s%s", buf, named ? "+" : "", named ? codec : "");
    c->gamma = c->encode = c->decode = c->t = 0.0;
    return 0;
}

int auto_parse(const char *list, dt_auto_cand *out, int max, int *n)
{
    *n = 0;
    for (const char *p = list; p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (*n == max) return dt_fail("--auto-allow: at most %d candidates", max);
        if (parse_one(p, len, &out[*n]) != 0) return -1;
        for (int i = 0; i < *n; i++)
            if (strcmp(out[i].name, out[*n].name) == 0) return dt_fail("--auto-allow: %s is listed twice", out[i].name);
        ++*n;
        p = comma ? comma + 1 : NULL; /* "dsync," ends in an empty candidate, which parse_one refuses */
    }
    return *n > 0 ? 0 : dt_fail("--auto-allow: no candidates");
}

/* env as the candidate's mode would see it: its options and codec */
static int cand_env(const dt_auto_cand *c, const dt_mode_env *env, dt_mode_env *e)
{
    dt_comm_opts o = env->opts;
    *e = *env;
    o.compress = (char *)c->codec;
    e->opts = mode_opts_for(c->mode, &o);
    return mode_codec_create(&e->opts, &e->codec);
}

int auto_calibrate(dt_auto_cand *c, int n, const dt_mode_env *env)
{
    for (int i = 0; i < n; i++) {
        dt_mode_env e;
        dt_times cost = {0};
        if (cand_env(&c[i], env, &e) != 0) return -1;
        /* --model-gamma: every codec's time per value, as the model takes it in every mode */
        c[i].gamma = env->opts.model_gamma >= 0 ? env->opts.model_gamma : netmodel_codec_gamma(&e.codec);
        if (c[i].mode->calibrate && c[i].mode->calibrate(&e, &cost) != 0)
            return dt_fail_prefix("--mode auto: timing %s", c[i].name);
        c[i].encode = cost.encode, c[i].decode = cost.decode;
    }
    return 0;
}

void auto_format(const dt_auto_cand *c, int n, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < n && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s %.3f ms", i ? ", " : "", c[i].name, 1e3 * c[i].t);
}

static int by_time(const void *a, const void *b)
{
    const dt_auto_cand *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

int auto_rank(dt_auto_cand *c, int n, const dt_mode_env *env, double comp, double comp_cpu, dt_auto_cand *chosen)
{
    double best = 0.0;
    for (int i = 0; i < n; i++) {
        dt_mode_env e = *env;
        dt_times m = {.forward = comp, .cpu = comp_cpu, .encode = c[i].encode, .decode = c[i].decode};
        if (cand_env(&c[i], env, &e) != 0) return -1;
        e.model.gamma = c[i].gamma;
        c[i].t = c[i].mode->predict(NULL, &e, &m);
        if (i == 0 || c[i].t < best) best = c[i].t;
    }
    for (int i = 0; i < n; i++) /* the first in the order of preference within the margin of the fastest */
        if (c[i].t <= (1.0 + AUTO_MARGIN) * best) {
            *chosen = c[i];
            break;
        }
    qsort(c, (size_t)n, sizeof *c, by_time);
    return 0;
}
