/* Weight files: the net's named tensors in the safetensors layout, checked against the net. */
#include "weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "util.h"

#define WEIGHTS_VERSION "1"

/* The i-th named tensor of the net: trainable ones, then state; its host data in w or state. */
static const dt_param *tensor_at(const dt_net *net, int i, const float *w, const float *state, const float **data)
{
    const dt_param *p = i < net->n_tensors ? net->tensors[i] : net->states[i - net->n_tensors];
    *data = (i < net->n_tensors ? w : state) + p->offset;
    return p;
}

/* "NAME.running_mean" is a state of the net: NAME is a batch-norm layer, which PyTorch gives a
 * NAME.num_batches_tracked counter. Its length, or 0. */
static size_t bn_prefix(const dt_param *p)
{
    size_t n = strlen(p->name), k = strlen(".running_mean");
    return n > k && strcmp(p->name + n - k, ".running_mean") == 0 ? n - k : 0;
}

int weights_save(const dt_net *net, const float *w, const float *state, const char *path, const char *dataset,
                 int64_t batches)
{
    int n = net->n_tensors + net->n_states, m = n;
    st_tensor *t = calloc(2 * (size_t)n + 1, sizeof *t);
    char **names = calloc((size_t)n + 1, sizeof *names);
    const char *mk[] = {"format", "version", "net", "dataset", "producer"};
    const char *mv[] = {WEIGHTS_FORMAT, WEIGHTS_VERSION, net->name, dataset ? dataset : "", "dtrain " PACKAGE_VERSION};
    int rc = -1;
    if (!t || !names) {
        dt_fail("out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        const dt_param *p = tensor_at(net, i, w, state, &t[i].data);
        size_t k = bn_prefix(p);
        t[i].name = p->name;
        t[i].n_dims = p->n_dims;
        for (int d = 0; d < p->n_dims; d++) t[i].shape[d] = p->dims[d];
        if (k) { /* PyTorch's counter beside the running statistics, so load_state_dict(strict=True) takes the file */
            if (asprintf(&names[m - n], "%.*s.num_batches_tracked", (int)k, p->name) < 0) {
                names[m - n] = NULL;
                dt_fail("out of memory");
                goto out;
            }
            t[m].name = names[m - n];
            t[m].n_dims = 0;
            t[m].i64 = &batches;
            m++;
        }
    }
    rc = st_write(path, t, m, mk, mv, (int)DT_ARRAY_LEN(mk));
out:
    for (int i = 0; names && i < m - n; i++) free(names[i]);
    free(names);
    free(t);
    return rc;
}

int weights_read(const dt_net *net, const char *path, float *w, float *state, int64_t *batches)
{
    st_file *f;
    if (st_read(path, &f) != 0) return -1;
    int rc = weights_from(net, f, path, w, state, batches);
    st_close(f);
    return rc;
}

int weights_check_finite(const dt_net *net, const float *w, const float *state, const char *path)
{
    for (int i = 0; i < net->n_tensors + net->n_states; i++) {
        const float *d;
        const dt_param *p = tensor_at(net, i, w, state, &d);
        size_t bad = 0, first = 0;
        for (size_t k = 0; k < p->n; k++)
            if (!isfinite(d[k]) && !bad++) first = k;
        if (bad)
            return bad == 1 ? dt_fail("%s: tensor '%s' holds a non-finite value ([%zu] is %g)", path, p->name, first,
                                      (double)d[first])
                            : dt_fail("%s: tensor '%s' holds %zu non-finite values (the first, [%zu], is %g)", path,
                                      p->name, bad, first, (double)d[first]);
    }
    return 0;
}

/* IEEE half and bfloat16 to float */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 31) bits = sign | 0x7f800000u | man << 13; /* inf, NaN */
    else if (exp) bits = sign | (exp + 112) << 23 | man << 13;
    else if (!man) bits = sign;
    else { /* subnormal: normalise */
        int e = -1;
        do man <<= 1, e++;
        while (!(man & 1024));
        bits = sign | (uint32_t)(112 - e) << 23 | (man & 1023) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* n values of dtype at src (little-endian) into floats; -1 for a dtype that holds no real numbers */
static int to_float(const char *dtype, const uint8_t *src, size_t n, float *dst)
{
    if (!strcmp(dtype, "F32")) memcpy(dst, src, n * 4);
    else if (!strcmp(dtype, "F64"))
        for (size_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, src + 8 * i, 8);
            dst[i] = (float)v;
        }
    else if (!strcmp(dtype, "F16"))
        for (size_t i = 0; i < n; i++) dst[i] = half_to_float((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
    else if (!strcmp(dtype, "BF16"))
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)(src[2 * i] | src[2 * i + 1] << 8) << 16;
            memcpy(&dst[i], &bits, 4);
        }
    else return -1;
    return 0;
}

/* appends name to a list of at most 8 shown ("a, b, ... and 3 more" once past that) */
static void list_add(char *buf, size_t n, int *count, const char *name)
{
    size_t len = strlen(buf);
    if (++*count <= 8) snprintf(buf + len, n - len, "%s%s", len ? ", " : "", name);
}

static void list_end(char *buf, size_t n, int count)
{
    size_t len = strlen(buf);
    if (count > 8) snprintf(buf + len, n - len, " and %d more", count - 8);
}

int weights_from(const dt_net *net, const st_file *f, const char *path, float *w, float *state, int64_t *batches)
{
    char missing[1024] = "", extra[1024] = "", shape[1024] = "";
    int n_missing = 0, n_extra = 0, n_shape = 0;
    if (batches) *batches = 0;
    /* the names first, then the shapes, then the values: a file of another net is said to be one,
     * not found out by its first tensor of another shape */
    for (int i = 0; i < net->n_tensors + net->n_states; i++) {
        const float *dst;
        const dt_param *p = tensor_at(net, i, w, state, &dst);
        const st_entry *e = st_find(f, p->name);
        int64_t want[ST_MAX_DIMS];
        char a[96], b[96];
        if (!e) {
            list_add(missing, sizeof missing, &n_missing, p->name);
            continue;
        }
        for (int d = 0; d < p->n_dims; d++) want[d] = p->dims[d];
        int same = e->n_dims == p->n_dims;
        for (int d = 0; same && d < p->n_dims; d++) same = e->shape[d] == want[d];
        if (!same && n_shape++ == 0) {
            st_shape_format(e->n_dims, e->shape, a, sizeof a);
            st_shape_format(p->n_dims, want, b, sizeof b);
            snprintf(shape, sizeof shape, "tensor '%s' has shape %s (expected %s for net %s)", p->name, a, b,
                     net->name);
        }
    }
    const char *format = st_meta(f, "format");
    int ckpt = format && strcmp(format, WEIGHTS_CKPT_FORMAT) == 0;
    for (int i = 0; i < f->n; i++) {
        const st_entry *e = &f->e[i];
        const char *dot = strrchr(e->name, '.');
        if (net_find_tensor(net, e->name) || (ckpt && strchr(e->name, ':'))) continue;
        if (dot && !strcmp(dot, ".num_batches_tracked")) { /* PyTorch's counter of a batch-norm layer of the net */
            char stat[300];
            snprintf(stat, sizeof stat, "%.*s.running_mean", (int)(dot - e->name), e->name);
            if (net_find_tensor(net, stat)) {
                int64_t v = 0;
                if (strcmp(e->dtype, "I64") != 0 || e->end - e->begin != 8)
                    return dt_fail("%s: tensor '%s' is %s of %llu bytes (expected one I64, as PyTorch writes it)", path,
                                   e->name, e->dtype, (unsigned long long)(e->end - e->begin));
                for (int k = 7; k >= 0; k--) v = (int64_t)((uint64_t)v << 8 | f->data[e->begin + (size_t)k]);
                if (v < 0)
                    return dt_fail("%s: tensor '%s' is %lld (expected a count, 0 or more)", path, e->name,
                                   (long long)v);
                if (batches && v > *batches) *batches = v;
                continue;
            }
        }
        list_add(extra, sizeof extra, &n_extra, e->name);
    }
    if (n_missing || n_extra) {
        list_end(missing, sizeof missing, n_missing);
        list_end(extra, sizeof extra, n_extra);
        return dt_fail(
            "%s: does not hold the tensors of net %s: %d missing%s%s%s, %d not in the net%s%s%s%s%s (is this file "
            "from another net?)",
            path, net->name, n_missing, n_missing ? " (" : "", missing, n_missing ? ")" : "", n_extra,
            n_extra ? " (" : "", extra, n_extra ? ")" : "", n_shape ? "; and " : "", shape);
    }
    if (n_shape)
        return dt_fail("%s: %s%s", path, shape, n_shape > 1 ? " and more of other shapes" : "");
    for (int i = 0; i < net->n_tensors + net->n_states; i++) {
        const float *dst;
        const dt_param *p = tensor_at(net, i, w, state, &dst);
        const st_entry *e = st_find(f, p->name);
        if (to_float(e->dtype, f->data + e->begin, p->n, (float *)dst) != 0)
            return dt_fail("%s: tensor '%s' is %s (expected F32, F16, BF16 or F64)", path, p->name, e->dtype);
    }
    return 0;
}
