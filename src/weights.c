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

int weights_save(const dt_net *net, const float *w, const float *state, const char *path, const char *dataset)
{
    int n = net->n_tensors + net->n_states;
    st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    const char *mk[] = {"format", "version", "net", "dataset", "producer"};
    const char *mv[] = {WEIGHTS_FORMAT, WEIGHTS_VERSION, net->name, dataset ? dataset : "", "dtrain " PACKAGE_VERSION};
    int rc;
    if (!t) return dt_fail("out of memory");
    for (int i = 0; i < n; i++) {
        const dt_param *p = tensor_at(net, i, w, state, &t[i].data);
        t[i].name = p->name;
        t[i].n_dims = p->n_dims;
        for (int d = 0; d < p->n_dims; d++) t[i].shape[d] = p->dims[d];
    }
    rc = st_write(path, t, n, mk, mv, (int)DT_ARRAY_LEN(mk));
    free(t);
    return rc;
}

int weights_read(const dt_net *net, const char *path, float *w, float *state)
{
    st_file *f;
    if (st_read(path, &f) != 0) return -1;
    int rc = weights_from(net, f, path, w, state);
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
            return dt_fail("%s: tensor '%s' holds %zu non-finite values (the first, [%zu], is %g)", path, p->name, bad,
                           first, (double)d[first]);
    }
    return 0;
}

int weights_from(const dt_net *net, const st_file *f, const char *path, float *w, float *state)
{
    int rc = -1;
    for (int i = 0; i < net->n_tensors + net->n_states; i++) {
        const float *dst;
        const dt_param *p = tensor_at(net, i, w, state, &dst);
        const st_entry *e = st_find(f, p->name);
        int64_t want[ST_MAX_DIMS];
        int same = 1;
        char a[96], b[96];
        if (!e) {
            dt_fail("%s: no tensor '%s' (expected every tensor of net %s; is this file from another net?)", path,
                    p->name, net->name);
            goto out;
        }
        for (int d = 0; d < p->n_dims; d++) want[d] = p->dims[d];
        same = e->n_dims == p->n_dims;
        for (int d = 0; same && d < p->n_dims; d++) same = e->shape[d] == want[d];
        if (!same) {
            st_shape_format(e->n_dims, e->shape, a, sizeof a);
            st_shape_format(p->n_dims, want, b, sizeof b);
            dt_fail("%s: tensor '%s' has shape %s (expected %s for net %s)", path, p->name, a, b, net->name);
            goto out;
        }
        if (strcmp(e->dtype, "F32") != 0) {
            dt_fail("%s: tensor '%s' is %s (expected F32)", path, p->name, e->dtype);
            goto out;
        }
        memcpy((float *)dst, f->data + e->begin, p->n * sizeof(float));
    }
    const char *format = st_meta(f, "format");
    int ckpt = format && strcmp(format, WEIGHTS_CKPT_FORMAT) == 0;
    for (int i = 0; i < f->n; i++)
        if (!net_find_tensor(net, f->e[i].name) && !(ckpt && strchr(f->e[i].name, ':'))) {
            dt_fail("%s: tensor '%s' is not in net %s (is this file from another net?)", path, f->e[i].name,
                    net->name);
            goto out;
        }
    rc = 0;
out:
    return rc;
}

