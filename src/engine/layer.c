/* The layer-type table and the helpers layers share for reading their keys. */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../registry.h"
#include "../util.h"

extern const dt_layer_ops layer_input_ops, layer_dense_ops, layer_conv_ops, layer_maxpool_ops, layer_avgpool_ops,
    layer_batchnorm_ops, layer_lrn_ops, layer_relu_ops, layer_dropout_ops, layer_add_ops, layer_concat_ops,
    layer_flatten_ops, layer_shortcut_ops, layer_softmax_xent_ops;

static const dt_layer_ops *const types[] = {
    &layer_input_ops,     &layer_dense_ops, &layer_conv_ops, &layer_maxpool_ops, &layer_avgpool_ops,
    &layer_batchnorm_ops, &layer_lrn_ops,   &layer_relu_ops, &layer_dropout_ops, &layer_add_ops, &layer_concat_ops,
    &layer_flatten_ops,   &layer_shortcut_ops, &layer_softmax_xent_ops,
};

size_t shape_size(const dt_shape *s)
{
    size_t n = 1;
    for (int i = 0; i < s->n_dims; i++) n *= (size_t)s->d[i];
    return n;
}

void shape_format(const dt_shape *s, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < s->n_dims && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, i ? "x%d" : "%d", s->d[i]);
}

static const dt_registry registry = DT_REGISTRY("layer type", types);

const dt_layer_ops *layer_find(const char *type) { return registry_find(&registry, type); }

const char *layer_type_list(void)
{
    static char buf[512];
    return buf[0] ? buf : registry_list(&registry, buf, sizeof buf);
}

int layer_n_types(void) { return registry.n; }
const dt_layer_ops *layer_type_at(int i) { return types[i]; }

dt_kv *layer_kv(dt_kv *kv, int n_kv, const char *key)
{
    for (int i = 0; i < n_kv; i++)
        if (strcmp(kv[i].key, key) == 0) {
            kv[i].used = 1;
            return &kv[i];
        }
    return NULL;
}

/* k->val as the number it holds: the shortest text that reads back as v */
static void kv_number(dt_kv *k, double v)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(k->val, sizeof k->val, "%.*g", digits, v);
        if (strtod(k->val, NULL) == v) return;
    }
}

int layer_kv_int(dt_kv *kv, int n_kv, const char *key, long lo, long hi, long dflt, int required, const char *where,
                 const char *type, long *out)
{
    dt_kv *k = layer_kv(kv, n_kv, key);
    if (!k) {
        if (required)
            return dt_fail("%s: %s: missing required key '%s' (expected %s=N with N in [%ld, %ld])", where, type, key,
                           key, lo, hi);
        *out = dflt;
        return 0;
    }
    if (dt_parse_long(k->val, lo, hi, key, out) != 0) return dt_fail_prefix("%s: %s", where, type);
    snprintf(k->val, sizeof k->val, "%ld", *out);
    k->is_default = !required && *out == dflt;
    return 0;
}

int layer_kv_float(dt_kv *kv, int n_kv, const char *key, double lo, double hi, double dflt, const char *where,
                   const char *type, double *out)
{
    dt_kv *k = layer_kv(kv, n_kv, key);
    if (!k) {
        *out = dflt;
        return 0;
    }
    if (dt_parse_double(k->val, lo, hi, key, out) != 0) return dt_fail_prefix("%s: %s", where, type);
    kv_number(k, *out);
    k->is_default = *out == dflt;
    return 0;
}

int layer_kv_init(dt_kv *kv, int n_kv, const char *key, dt_init dflt, const char *where, const char *type,
                  dt_init *out)
{
    static const struct {
        const char *name;
        dt_init_kind kind;
        int has_value;
    } kinds[] = {{"torch", DT_INIT_TORCH, 0},   {"he", DT_INIT_HE, 0},         {"xavier", DT_INIT_XAVIER, 0},
                 {"normal", DT_INIT_NORMAL, 1}, {"const", DT_INIT_CONST, 1}};
    dt_kv *k = layer_kv(kv, n_kv, key);
    if (!k) {
        *out = dflt;
        return 0;
    }
    const char *colon = strchr(k->val, ':');
    size_t len = colon ? (size_t)(colon - k->val) : strlen(k->val);
    for (size_t i = 0; i < DT_ARRAY_LEN(kinds); i++) {
        if (strlen(kinds[i].name) != len || strncmp(kinds[i].name, k->val, len) != 0) continue;
        out->kind = kinds[i].kind;
        out->value = 0.0f;
        if (kinds[i].has_value != (colon != NULL))
            return dt_fail("%s: %s: %s=%s: expected %s%s", where, type, key, k->val, kinds[i].name,
                           kinds[i].has_value ? ":VALUE (e.g. normal:0.01)" : " without a value");
        if (colon) {
            double v;
            if (dt_parse_double(colon + 1, kinds[i].kind == DT_INIT_NORMAL ? 0.0 : -1e6, 1e6,
                                kinds[i].kind == DT_INIT_NORMAL ? "normal:STD (a standard deviation)"
                                                                : "const:VALUE",
                                &v) != 0)
                return dt_fail_prefix("%s: %s: %s", where, type, key);
            out->value = (float)v;
        }
        if (colon) { /* as read: normal:0.010 is normal:0.01 */
            char v[32];
            snprintf(v, sizeof v, "%.9g", (double)out->value);
            snprintf(k->val, sizeof k->val, "%s:%s", kinds[i].name, v);
        }
        k->is_default = out->kind == dflt.kind && out->value == dflt.value;
        return 0;
    }
    return dt_fail("%s: %s: unknown %s '%s' (expected one of torch, he, xavier, normal:STD, const:VALUE)", where,
                   type, key, k->val);
}

void layer_param(dt_layer *l, const char *suffix, int n_dims, const int *dims, dt_init init, int fan_in,
                 int fan_out)
{
    dt_param *p = &l->params[l->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s.%s", l->name, suffix);
    p->n_dims = n_dims;
    p->n = 1;
    for (int i = 0; i < n_dims; i++) {
        p->dims[i] = dims[i];
        p->n *= (size_t)dims[i];
    }
    p->init = init;
    p->fan_in = fan_in;
    p->fan_out = fan_out;
    p->kind = DT_PARAM_TRAIN;
}

void layer_state(dt_layer *l, const char *suffix, int n, dt_init init, int average)
{
    layer_param(l, suffix, 1, &n, init, 1, 1);
    l->params[l->n_params - 1].kind = DT_PARAM_STATE;
    l->params[l->n_params - 1].average = average;
}

void shape_chw(const dt_shape *s, int *c, int *h, int *w)
{
    *c = s->d[0];
    *h = s->n_dims > 1 ? s->d[1] : 1;
    *w = s->n_dims > 2 ? s->d[2] : 1;
}

int window_geometry(int in, int k, int stride, int pad, int ceil_mode, int *out, int *pad_begin, int *pad_end)
{
    if (pad < 0) { /* SAME */
        *out = (in + stride - 1) / stride;
        int total = (*out - 1) * stride + k - in;
        if (total < 0) total = 0;
        *pad_begin = total / 2;
        *pad_end = total - *pad_begin;
        return 0;
    }
    int span = in + 2 * pad - k;
    if (span < 0) return -1;
    *out = ceil_mode ? (span + stride - 1) / stride + 1 : span / stride + 1;
    if (ceil_mode && (*out - 1) * stride >= in + pad) (*out)--; /* the last window must start inside */
    *pad_begin = pad;
    *pad_end = (*out - 1) * stride + k - in - pad;
    if (*pad_end < pad && !ceil_mode) *pad_end = pad;
    if (*pad_end < 0) *pad_end = 0;
    return 0;
}

size_t layer_act_size(const dt_layer *l, dt_backend *be, int rows)
{
    if (l->out.n_dims < 3) return (size_t)rows * l->out_size;
    return be->act_size(be, l->layout, rows, l->out.d[0], l->out.d[1], l->out.d[2]);
}
