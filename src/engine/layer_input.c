/* input — where a batch enters the net. Output [rows][C*H*W], filled by net_set_input.
 * Keys: shape=CxHxW (1 to 3 dims, e.g. shape=1x28x28 or shape=784). */
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "layer.h"

static int input_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    dt_kv *k = layer_kv(kv, n_kv, "shape");
    char buf[96], *save = NULL, *tok;
    int n = 0;
    if (!k) return dt_fail("%s: input: missing required key 'shape' (expected shape=CxHxW, e.g. 1x28x28)", where);
    snprintf(buf, sizeof buf, "%s", k->val);
    if (dt_list_check(k->val, 'x') != 0)
        return dt_fail("%s: input: shape=%s: expected CxHxW, e.g. 1x28x28", where, k->val);
    for (tok = strtok_r(buf, "x", &save); tok; tok = strtok_r(NULL, "x", &save)) {
        long v;
        if (n == 3) return dt_fail("%s: input: shape=%s has more than 3 dims (expected CxHxW)", where, k->val);
        if (dt_parse_long(tok, 1, 1 << 20, "shape", &v) != 0) return dt_fail_prefix("%s: input", where);
        l->out.d[n++] = (int)v;
    }
    if (n == 0) return dt_fail("%s: input: shape is empty (expected CxHxW, e.g. 1x28x28)", where);
    l->out.n_dims = n;
    return 0;
}

static int input_infer(dt_layer *l, const char *where)
{
    (void)where;
    l->out_size = shape_size(&l->out);
    return 0;
}

static int input_noop(dt_layer *l, dt_backend *be, dt_pass *p)
{
    (void)l, (void)be, (void)p;
    return 0;
}

const dt_layer_ops layer_input_ops = {
    .type = "input",
    .help = "the batch enters here; shape=CxHxW",
    .keys = "shape",
    .min_in = 0,
    .max_in = 0,
    .configure = input_configure,
    .infer = input_infer,
    .forward = input_noop,
    .backward = input_noop,
};
