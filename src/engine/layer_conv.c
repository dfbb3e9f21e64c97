/* conv — 2-D convolution (cross-correlation, as every framework computes it).
 *   x  [rows][C][H][W]                 W  [O][C/groups][KH][KW]   b [O]   (PyTorch's layouts)
 *   y  [rows][O][OH][OW],  OH = (H + pad_top + pad_bottom - KH) / stride_h + 1
 * Keys: out=O, k=K (or kh= kw=), stride=S (or sh= sw=), pad=P | same | T,B,L,R (asymmetric; same:
 * OH = ceil(H / S) with the odd pixel at the end, as TensorFlow), groups=G, bias=1|0,
 * init=torch|he|xavier|normal:STD|const:VALUE. The backend computes it (oneDNN on the CPU). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "layer.h"

typedef struct {
    int out, kh, kw, sh, sw, groups, bias, same;
    int pad[4]; /* top, bottom, left, right */
    dt_init init;
    dt_conv_cfg cfg;
    void *plan;
} conv_state;

static int kv_pair(dt_kv *kv, int n_kv, const char *both, const char *a, const char *b, long dflt, const char *where,
                   int *va, int *vb)
{
    long x, y, z;
    if (layer_kv_int(kv, n_kv, both, 1, 1 << 16, dflt, 0, where, "conv", &x) != 0) return -1;
    if (layer_kv_int(kv, n_kv, a, 1, 1 << 16, x, 0, where, "conv", &y) != 0) return -1;
    if (layer_kv_int(kv, n_kv, b, 1, 1 << 16, x, 0, where, "conv", &z) != 0) return -1;
    *va = (int)y, *vb = (int)z;
    return 0;
}

static int conv_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    conv_state *s = calloc(1, sizeof *s);
    long v;
    dt_kv *k;
    if (!s) return dt_fail("out of memory");
    l->state = s;
    if (layer_kv_int(kv, n_kv, "out", 1, 1 << 20, 0, 1, where, "conv", &v) != 0) return -1;
    s->out = (int)v;
    if (!layer_kv(kv, n_kv, "k") && !(layer_kv(kv, n_kv, "kh") && layer_kv(kv, n_kv, "kw")))
        return dt_fail("%s: conv: missing required key 'k' (expected k=K, or kh= and kw=)", where);
    for (int i = 0; i < n_kv; i++) /* layer_kv marked them used while looking: unmark to read them properly */
        if (!strcmp(kv[i].key, "k") || !strcmp(kv[i].key, "kh") || !strcmp(kv[i].key, "kw")) kv[i].used = 0;
    if (kv_pair(kv, n_kv, "k", "kh", "kw", 1, where, &s->kh, &s->kw) != 0) return -1;
    if (kv_pair(kv, n_kv, "stride", "sh", "sw", 1, where, &s->sh, &s->sw) != 0) return -1;
    if (layer_kv_int(kv, n_kv, "groups", 1, 1 << 16, 1, 0, where, "conv", &v) != 0) return -1;
    s->groups = (int)v;
    if (layer_kv_int(kv, n_kv, "bias", 0, 1, 1, 0, where, "conv", &v) != 0) return -1;
    s->bias = (int)v;
    if (layer_kv_init(kv, n_kv, "init", (dt_init){DT_INIT_TORCH, 0}, where, "conv", &s->init) != 0) return -1;
    if ((k = layer_kv(kv, n_kv, "pad"))) {
        if (!strcmp(k->val, "same")) {
            s->same = 1;
        } else {
            char buf[96], *save = NULL, *tok;
            int n = 0;
            long p;
            snprintf(buf, sizeof buf, "%s", k->val);
            if (dt_list_check(k->val, ',') != 0)
                return dt_fail("%s: conv: pad=%s: expected P, same, or T,B,L,R", where, k->val);
            for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (n == 4 || dt_parse_long(tok, 0, LONG_MAX, "pad", &p) != 0)
                    return dt_fail("%s: conv: pad=%s: expected P, same, or T,B,L,R (each 0 to %d)", where, k->val,
                                   1 << 16);
                if (p > (1 << 16))
                    return dt_fail("%s: conv: pad=%s: %ld is more padding than %d", where, k->val, p, 1 << 16);
                s->pad[n++] = (int)p;
            }
            if (n == 1) s->pad[1] = s->pad[2] = s->pad[3] = s->pad[0];
            else if (n != 4) return dt_fail("%s: conv: pad=%s: expected P, same, or T,B,L,R", where, k->val);
        }
    }
    return 0;
}

static int conv_infer(dt_layer *l, const char *where)
{
    conv_state *s = l->state;
    int c, h, w, oh, ow, pt, pb, pl, pr;
    char shape[48];
    shape_format(&l->in[0]->out, shape, sizeof shape);
    if (l->in[0]->out.n_dims != 3)
        return dt_fail("%s: conv: expected an input of C x H x W, found %s from '%s'", where, shape, l->in[0]->name);
    shape_chw(&l->in[0]->out, &c, &h, &w);
    if (c % s->groups || s->out % s->groups)
        return dt_fail("%s: conv: groups=%d must divide the input channels (%d) and out=%d", where, s->groups, c,
                       s->out);
    if (s->same) {
        window_geometry(h, s->kh, s->sh, -1, 0, &oh, &pt, &pb);
        window_geometry(w, s->kw, s->sw, -1, 0, &ow, &pl, &pr);
    } else { /* explicit (maybe asymmetric) padding */
        pt = s->pad[0], pb = s->pad[1], pl = s->pad[2], pr = s->pad[3];
        if (h + pt + pb < s->kh || w + pl + pr < s->kw)
            return dt_fail("%s: conv: a %dx%d kernel does not fit the %s input with this padding", where, s->kh, s->kw,
                           shape);
        oh = (h + pt + pb - s->kh) / s->sh + 1; /* rows the last window does not reach are left out */
        ow = (w + pl + pr - s->kw) / s->sw + 1;
    }
    l->out.n_dims = 3;
    l->out.d[0] = s->out, l->out.d[1] = oh, l->out.d[2] = ow;
    l->out_size = (size_t)s->out * oh * ow;
    s->cfg = (dt_conv_cfg){c,  h,  w,  s->out, oh,        ow,      s->kh,           s->kw,           s->sh, s->sw,
                           pt, pb, pl, pr,     s->groups, s->bias, DT_LAYOUT_PLAIN, DT_LAYOUT_PLAIN, 0,     0};
    /* sizes in 64 bits: channels up to 2^20 times a kernel up to 2^16 x 2^16 overflow an int */
    int64_t per_out = (int64_t)(c / s->groups) * s->kh * s->kw, n_w = per_out * s->out;
    if (n_w > INT32_MAX || (int64_t)s->out * oh * ow > INT32_MAX)
        return dt_fail("%s: conv: %lld weights and %lld outputs per sample (at most 2^31 each)", where, (long long)n_w,
                       (long long)s->out * oh * ow);
    int dims[4] = {s->out, c / s->groups, s->kh, s->kw};
    int fan_in = (int)per_out, fan_out = (int)((int64_t)(s->out / s->groups) * s->kh * s->kw);
    l->n_params = 0;
    layer_param(l, "weight", 4, dims, s->init, fan_in, fan_out);
    if (s->bias) {
        dt_init b = s->init.kind == DT_INIT_TORCH ? s->init : (dt_init){DT_INIT_CONST, 0.0f};
        layer_param(l, "bias", 1, &s->out, b, fan_in, fan_out);
    }
    return 0;
}

static int conv_alloc(dt_layer *l, dt_backend *be, int max_rows)
{
    conv_state *s = l->state;
    (void)max_rows;
    s->cfg.in_layout = l->in[0]->layout;
    s->cfg.out_layout = l->layout;
    s->cfg.out_bf16 = s->cfg.in_bf16 = 0;
    l->y_bf16 = l->y_bf16 && be->conv_bf16_out && be->conv_bf16_out(be, &s->cfg); /* net_alloc's mark */
    s->cfg.out_bf16 = l->y_bf16;
    s->cfg.in_bf16 = l->in[0]->y_bf16; /* a batchnorm's or an add's, which asked conv_takes_bf16 */
    return (s->plan = be->conv_plan(be, &s->cfg)) ? 0 : -1;
}

static int conv_takes_bf16(dt_layer *l, dt_backend *be)
{
    conv_state *s = l->state;
    dt_conv_cfg c = s->cfg;
    c.in_layout = l->in[0]->layout, c.out_layout = l->layout, c.out_bf16 = c.in_bf16 = 0;
    return be->conv_bf16_in && be->conv_bf16_in(be, &c);
}

static int conv_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    conv_state *s = l->state;
    return be->conv_fwd(be, s->plan, p->rows, l->in[0]->y, l->params[0].w, s->bias ? l->params[1].w : NULL, l->y);
}

static int conv_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    conv_state *s = l->state;
    dt_layer *in = l->in[0];
    int train = l->params[0].kind == DT_PARAM_TRAIN;
    return be->conv_bwd(be, s->plan, p->rows, in->y, l->params[0].w, l->dy, in->requires_grad ? in->dy : NULL,
                        l->in_accum[0] ? 1.0f : 0.0f, train ? l->params[0].g : NULL,
                        train && s->bias ? l->params[1].g : NULL);
}

static void conv_destroy(dt_layer *l, dt_backend *be)
{
    conv_state *s = l->state;
    if (s && s->plan) be->plan_free(be, s->plan);
}

const dt_layer_ops layer_conv_ops = {
    .type = "conv",
    .help = "2-D convolution; out=O k=K (or kh=KH kw=KW) stride=S (or sh=SH sw=SW) pad=P|same|T,B,L,R groups=G "
            "bias=1|0 init=torch|he|xavier|normal:STD|const:VALUE",
    .keys = "out k kh kw stride sh sw pad groups bias init",
    .min_in = 1,
    .max_in = 1,
    .configure = conv_configure,
    .infer = conv_infer,
    .alloc = conv_alloc,
    .forward = conv_forward,
    .backward = conv_backward,
    .takes_bf16 = conv_takes_bf16,
    .destroy = conv_destroy,
};
