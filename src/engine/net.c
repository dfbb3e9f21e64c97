/* Parsing .net files, inferring shapes, laying out the arenas, running passes.
 * The format is documented in man/dtrain-net.5. */
#include "net.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "../util.h"

#define MAX_KV 16
#define MAX_LINE 4096

static void layer_free(dt_layer *l)
{
    if (!l) return;
    free(l->state);
    free(l);
}

void net_destroy(dt_net *net)
{
    if (!net) return;
    dt_backend *be = net->be;
    for (int i = 0; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        if (be) {
            be->free(be, l->y);
            be->free(be, l->dy);
        }
        layer_free(l);
    }
    if (be) {
        be->free(be, net->w);
        be->free(be, net->g_own);
        be->free(be, net->labels);
    }
    free(net->layers);
    free(net->tensors);
    free(net);
}

static int valid_name(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-') return 0;
    return 1;
}

static dt_layer *find_layer(dt_net *net, const char *name)
{
    for (int i = 0; i < net->n_layers; i++)
        if (strcmp(net->layers[i]->name, name) == 0) return net->layers[i];
    return NULL;
}

/* Splits one line into type and key=value pairs. Returns the number of pairs, -1 on error. */
static int tokenize(char *line, const char *where, char **type, dt_kv *kv)
{
    int n = 0;
    char *save = NULL, *tok;
    *type = NULL;
    for (tok = strtok_r(line, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
        if (!*type) {
            if (strchr(tok, '='))
                return dt_fail("%s: expected a layer type first (one of %s), found '%s'", where, layer_type_list(), tok);
            *type = tok;
            continue;
        }
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return dt_fail("%s: expected key=value, found '%s'", where, tok);
        *eq = 0;
        if (n == MAX_KV) return dt_fail("%s: more than %d keys on one line", where, MAX_KV);
        if (strlen(tok) >= sizeof kv[n].key || strlen(eq + 1) >= sizeof kv[n].val)
            return dt_fail("%s: key or value too long in '%s=%s'", where, tok, eq + 1);
        for (int i = 0; i < n; i++)
            if (strcmp(kv[i].key, tok) == 0) return dt_fail("%s: key '%s' given twice", where, tok);
        strcpy(kv[n].key, tok);
        strcpy(kv[n].val, eq + 1);
        kv[n].used = 0;
        n++;
    }
    return n;
}

static int parse_line(dt_net *net, char *line, int lineno, const char *origin, int *counts, dt_layer **prev)
{
    char where[600], *type;
    dt_kv kv[MAX_KV];
    dt_kv *k;
    int n_kv;
    const dt_layer_ops *ops;
    dt_layer *l;

    snprintf(where, sizeof where, "%s:%d", origin, lineno);
    if ((n_kv = tokenize(line, where, &type, kv)) < 0) return -1;
    if (!type) return 0; /* blank */
    ops = layer_find(type);
    if (!ops) return dt_fail("%s: unknown layer type '%s' (expected one of %s)", where, type, layer_type_list());

    l = calloc(1, sizeof *l);
    if (!l) return dt_fail("out of memory");
    dt_layer **grown = realloc(net->layers, sizeof *grown * (size_t)(net->n_layers + 1));
    if (!grown) {
        free(l);
        return dt_fail("out of memory");
    }
    net->layers = grown;
    net->layers[net->n_layers++] = l;
    l->ops = ops;
    l->line = lineno;

    int type_idx = 0;
    while (layer_type_at(type_idx) != ops) type_idx++;
    if ((k = layer_kv(kv, n_kv, "name"))) {
        if (!valid_name(k->val) || strlen(k->val) >= DT_NAME_MAX)
            return dt_fail("%s: name '%s': expected letters, digits, '_' or '-' (at most %d)", where, k->val,
                           DT_NAME_MAX - 1);
        strcpy(l->name, k->val);
    } else {
        snprintf(l->name, sizeof l->name, "%s%d", type, counts[type_idx] + 1);
    }
    counts[type_idx]++;
    for (int i = 0; i < net->n_layers - 1; i++)
        if (strcmp(net->layers[i]->name, l->name) == 0)
            return dt_fail("%s: layer name '%s' already used on line %d", where, l->name, net->layers[i]->line);

    if ((k = layer_kv(kv, n_kv, "in"))) {
        char buf[sizeof k->val], *save = NULL, *tok;
        snprintf(buf, sizeof buf, "%s", k->val);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            dt_layer *src = find_layer(net, tok);
            if (!src || src == l)
                return dt_fail("%s: in=%s: no layer named '%s' before this line", where, k->val, tok);
            if (l->n_in == DT_MAX_INPUTS) return dt_fail("%s: more than %d inputs", where, DT_MAX_INPUTS);
            l->in[l->n_in++] = src;
        }
    } else if (ops->min_in > 0 && *prev) {
        l->in[l->n_in++] = *prev;
    }
    if (l->n_in < ops->min_in || l->n_in > ops->max_in) {
        if (ops->max_in == 0)
            return dt_fail("%s: %s takes no inputs, found %d", where, type, l->n_in);
        if (l->n_in == 0)
            return dt_fail("%s: %s needs an input, but no layer comes before it (start with an input line)", where,
                           type);
        return dt_fail("%s: %s expects %d to %d inputs, found %d", where, type, ops->min_in, ops->max_in, l->n_in);
    }
    for (int i = 0; i < l->n_in; i++)
        if (l->in[i]->ops->is_loss)
            return dt_fail("%s: input '%s' is a loss layer; a loss must be the last layer", where, l->in[i]->name);

    if (ops->configure(l, kv, n_kv, where) != 0) return -1;
    for (int i = 0; i < n_kv; i++)
        if (!kv[i].used)
            return dt_fail("%s: %s: unknown key '%s' (expected one of: %s%sname in)", where, type, kv[i].key, ops->keys,
                           ops->keys[0] ? " " : "");
    if (ops->infer(l, where) != 0) return -1;
    if (l->out_size == 0) return dt_fail("%s: %s: output would be empty", where, type);
    *prev = l;
    return 0;
}

/* Checks the whole graph, sets requires_grad / in_accum, lays out the arena. */
static int finish(dt_net *net, const char *origin)
{
    if (net->n_layers == 0) return dt_fail("%s: no layers (expected an input line, layers, and a loss)", origin);
    if (net->layers[0]->ops != layer_find("input"))
        return dt_fail("%s:%d: the first layer must be 'input', found '%s'", origin, net->layers[0]->line,
                       net->layers[0]->ops->type);
    net->input = net->layers[0];
    for (int i = 1; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        if (l->ops == net->input->ops)
            return dt_fail("%s:%d: a second input layer (only one is supported)", origin, l->line);
        if (l->ops->is_loss && i != net->n_layers - 1)
            return dt_fail("%s:%d: loss layer '%s' must be the last line", origin, l->line, l->name);
    }
    dt_layer *last = net->layers[net->n_layers - 1];
    if (!last->ops->is_loss)
        return dt_fail("%s:%d: the last layer must be a loss (softmax_xent), found '%s'", origin, last->line,
                       last->ops->type);
    net->loss = last;

    /* every layer's output must be used by a later one (a dangling branch is a mistake) */
    for (int i = 0; i < net->n_layers - 1; i++) {
        int used = 0;
        for (int j = i + 1; j < net->n_layers && !used; j++)
            for (int k = 0; k < net->layers[j]->n_in; k++) used |= net->layers[j]->in[k] == net->layers[i];
        if (!used)
            return dt_fail("%s:%d: the output of '%s' is not used by any later layer", origin, net->layers[i]->line,
                           net->layers[i]->name);
    }

    for (int i = 0; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        l->requires_grad = l->n_params > 0 && !l->frozen;
        for (int k = 0; k < l->n_in; k++) l->requires_grad |= l->in[k]->requires_grad;
    }
    /* backward visits layers in reverse: the first consumer met writes dy, the rest add */
    {
        char *written = calloc((size_t)net->n_layers, 1);
        if (!written) return dt_fail("out of memory");
        for (int i = net->n_layers - 1; i >= 0; i--) {
            dt_layer *l = net->layers[i];
            for (int k = 0; k < l->n_in; k++) {
                int src = 0;
                while (net->layers[src] != l->in[k]) src++;
                l->in_accum[k] = written[src];
                written[src] = 1;
            }
        }
        free(written);
    }

    net->n_tensors = 0;
    for (int i = 0; i < net->n_layers; i++) net->n_tensors += net->layers[i]->n_params;
    net->tensors = calloc((size_t)net->n_tensors + 1, sizeof *net->tensors);
    if (!net->tensors) return dt_fail("out of memory");
    size_t off = 0;
    int t = 0;
    for (int i = net->n_layers - 1; i >= 0; i--) {
        dt_layer *l = net->layers[i];
        for (int k = 0; k < l->n_params; k++) {
            l->params[k].offset = off;
            off += l->params[k].n;
            net->tensors[t++] = &l->params[k];
        }
    }
    net->n_params = off;
    return 0;
}

int net_parse(const char *text, const char *origin, const char *name, dt_net **out)
{
    dt_net *net = calloc(1, sizeof *net);
    int counts[64] = {0};
    dt_layer *prev = NULL;
    const char *p = text;
    int lineno = 0;
    if (!net) return dt_fail("out of memory");
    snprintf(net->origin, sizeof net->origin, "%s", origin);
    snprintf(net->name, sizeof net->name, "%s", name);
    while (*p) {
        char line[MAX_LINE];
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        lineno++;
        if (len >= sizeof line) {
            dt_fail("%s:%d: line longer than %d characters", origin, lineno, MAX_LINE - 1);
            goto fail;
        }
        memcpy(line, p, len);
        line[len] = 0;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        if (parse_line(net, line, lineno, origin, counts, &prev) != 0) goto fail;
        p += len + (nl ? 1 : 0);
    }
    if (finish(net, origin) != 0) goto fail;
    *out = net;
    return 0;
fail:
    net_destroy(net);
    return -1;
}

int net_load(const char *name_or_path, dt_net **out)
{
    size_t len = strlen(name_or_path);
    int is_file = strchr(name_or_path, '/') || (len > 4 && strcmp(name_or_path + len - 4, ".net") == 0);
    if (!is_file) {
        const char *text = net_builtin_text(name_or_path);
        char origin[128];
        if (!text)
            return dt_fail("--net: unknown net '%s' (expected one of %s, or a path to a .net file)", name_or_path,
                           net_builtin_list());
        snprintf(origin, sizeof origin, "nets/%s.net", name_or_path);
        return net_parse(text, origin, name_or_path, out);
    }
    char *text, base[DT_NAME_MAX];
    const char *slash = strrchr(name_or_path, '/');
    const char *b = slash ? slash + 1 : name_or_path;
    size_t bl = strlen(b);
    if (bl > 4 && strcmp(b + bl - 4, ".net") == 0) bl -= 4;
    if (bl >= sizeof base) bl = sizeof base - 1;
    memcpy(base, b, bl);
    base[bl] = 0;
    if (dt_read_file(name_or_path, &text, NULL) != 0) return dt_fail_prefix("--net");
    int rc = net_parse(text, name_or_path, base, out);
    free(text);
    return rc;
}

int net_alloc(dt_net *net, dt_backend *be, int max_batch)
{
    net->be = be;
    net->max_batch = max_batch < 1 ? 1 : max_batch;
    size_t rows = (size_t)net->max_batch;
    for (int i = 0; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        if (!(l->y = be->alloc(be, rows * l->out_size * sizeof(float)))) return -1;
        if (l->requires_grad && l != net->loss && !(l->dy = be->alloc(be, rows * l->out_size * sizeof(float))))
            return -1;
    }
    if (!(net->w = be->alloc(be, DT_MAX(net->n_params, 1) * sizeof(float)))) return -1;
    if (!(net->g = net->g_own = be->alloc(be, DT_MAX(net->n_params, 1) * sizeof(float)))) return -1;
    if (!(net->labels = be->alloc(be, rows * sizeof(int32_t)))) return -1;
    for (int t = 0; t < net->n_tensors; t++) {
        net->tensors[t]->w = net->w + net->tensors[t]->offset;
        net->tensors[t]->g = net->g + net->tensors[t]->offset;
    }
    return 0;
}

int net_init_params(dt_net *net, uint64_t seed)
{
    for (int t = 0; t < net->n_tensors; t++) {
        dt_param *p = net->tensors[t];
        float *h = dt_malloc(p->n * sizeof(float));
        dt_rng rng;
        if (!h) return -1;
        rng_seed(&rng, seed, rng_stream_id(p->name));
        double a;
        for (size_t i = 0; i < p->n; i++) {
            switch (p->init.kind) {
            case DT_INIT_TORCH:
                a = 1.0 / sqrt((double)p->fan_in);
                h[i] = (float)((2.0 * rng_uniform_d(&rng) - 1.0) * a);
                break;
            case DT_INIT_HE: h[i] = (float)(rng_normal(&rng) * sqrt(2.0 / p->fan_in)); break;
            case DT_INIT_XAVIER:
                a = sqrt(6.0 / (p->fan_in + p->fan_out));
                h[i] = (float)((2.0 * rng_uniform_d(&rng) - 1.0) * a);
                break;
            case DT_INIT_NORMAL: h[i] = (float)(rng_normal(&rng) * p->init.value); break;
            case DT_INIT_CONST: h[i] = p->init.value; break;
            }
        }
        net->be->to_device(net->be, p->w, h, p->n * sizeof(float));
        free(h);
    }
    return 0;
}

void net_set_input(dt_net *net, const float *host, int rows)
{
    net->be->to_device(net->be, net->input->y, host, (size_t)rows * net->input->out_size * sizeof(float));
}

void net_set_labels(dt_net *net, const int32_t *host, int rows)
{
    net->be->to_device(net->be, net->labels, host, (size_t)rows * sizeof(int32_t));
}

void net_forward(dt_net *net, dt_pass *p)
{
    if (p->rows <= 0) return;
    for (int i = 1; i < net->n_layers; i++) net->layers[i]->ops->forward(net->layers[i], net->be, p);
}

void net_backward(dt_net *net, dt_pass *p, net_ready_fn ready, void *arg)
{
    size_t done = 0;
    for (int i = net->n_layers - 1; i >= 1; i--) {
        dt_layer *l = net->layers[i];
        if (p->rows > 0 && (l->requires_grad || l == net->loss)) l->ops->backward(l, net->be, p);
        if (l->n_params > 0) {
            if (p->rows <= 0) /* no samples on this rank: its gradient contribution is zero */
                for (int k = 0; k < l->n_params; k++) net->be->scale(net->be, l->params[k].g, 0.0f, l->params[k].n);
            const dt_param *last = &l->params[l->n_params - 1];
            done = last->offset + last->n;
            if (ready) ready(arg, done);
        }
    }
}

dt_arena net_arena(const dt_net *net)
{
    dt_arena a = {net->w, net->g, net->n_params, net->n_tensors, net->tensors};
    return a;
}

void net_set_grad_arena(dt_net *net, float *g)
{
    net->g = g;
    for (int t = 0; t < net->n_tensors; t++) net->tensors[t]->g = g + net->tensors[t]->offset;
}

int net_n_classes(const dt_net *net) { return (int)net->loss->out_size; }

dt_param *net_find_tensor(const dt_net *net, const char *name)
{
    for (int t = 0; t < net->n_tensors; t++)
        if (strcmp(net->tensors[t]->name, name) == 0) return net->tensors[t];
    return NULL;
}

void net_print(const dt_net *net, FILE *f)
{
    fprintf(f, "%-16s %-13s %-14s %12s\n", "layer", "type", "output", "parameters");
    for (int i = 0; i < net->n_layers; i++) {
        const dt_layer *l = net->layers[i];
        char shape[48];
        size_t n = 0;
        for (int k = 0; k < l->n_params; k++) n += l->params[k].n;
        shape_format(&l->out, shape, sizeof shape);
        fprintf(f, "%-16s %-13s %-14s %12zu\n", l->name, l->ops->type, shape, n);
    }
    fprintf(f, "%-16s %-13s %-14s %12zu\n", "total", "", "", net->n_params);
}
