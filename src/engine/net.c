/* Parsing .net files (with blocks), inferring shapes, laying out the arenas, running passes.
 * The format is documented in man/dtrain-net.5. */
#include "net.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "../util.h"

#define MAX_KV 24
#define MAX_LINE 4096
#define MAX_BLOCKS 64
#define MAX_DEPTH 8
#define MAX_LINES 100000 /* after blocks are expanded: resnet50 has 230 */

static void layer_free(dt_layer *l, dt_backend *be)
{
    if (!l) return;
    if (be && l->ops->destroy) l->ops->destroy(l, be);
    free(l->state);
    free(l);
}

void net_destroy(dt_net *net)
{
    if (!net) return;
    dt_backend *be = net->be;
    for (int i = 0; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        if (be && !l->fused) be->free(be, l->y);
        layer_free(l, be);
    }
    if (be) {
        for (int s = 0; s < net->n_dy_bufs; s++) be->free(be, net->dy_bufs[s]);
        be->free(be, net->w);
        be->free(be, net->g_own);
        be->free(be, net->state);
        be->free(be, net->labels);
    }
    free(net->dy_bufs);
    free(net->layers);
    free(net->tensors);
    free(net->states);
    free(net->structure);
    free(net);
}

static int valid_name(const char *s)
{
    if (!*s || *s == '.') return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.') return 0;
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
                return dt_fail("%s: expected a layer type first (one of %s), found '%s'", where, layer_type_list(),
                               tok);
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
        kv[n].used = kv[n].is_default = 0;
        n++;
    }
    return n;
}

static int kv_cmp(const void *a, const void *b) { return strcmp(((const dt_kv *)a)->key, ((const dt_kv *)b)->key); }

/* net->structure's line for l, parsed from kv: type, name, in=, the other keys sorted (numbers as
 * read, keys at their defaults left out), -> shape */
static int structure_add(dt_net *net, const dt_layer *l, dt_kv *kv, int n_kv)
{
    char line[MAX_LINE + 256], shape[64];
    size_t n = (size_t)snprintf(line, sizeof line, "%s name=%s", l->ops->type, l->name);
    for (int i = 0; i < l->n_in && n < sizeof line; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", i ? "," : " in=", l->in[i]->name);
    qsort(kv, (size_t)n_kv, sizeof *kv, kv_cmp);
    for (int i = 0; i < n_kv && n < sizeof line; i++) /* a key at its default is the layer without it */
        if (strcmp(kv[i].key, "name") != 0 && strcmp(kv[i].key, "in") != 0 && !kv[i].is_default)
            n += (size_t)snprintf(line + n, sizeof line - n, " %s=%s", kv[i].key, kv[i].val);
    shape_format(&l->out, shape, sizeof shape);
    if (n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, " -> %s\n", shape);
    if (n >= sizeof line) return dt_fail("internal: a layer's description of %zu bytes", n);
    size_t have = net->structure ? strlen(net->structure) : 0;
    char *grown = realloc(net->structure, have + n + 1);
    if (!grown) return dt_fail("out of memory");
    memcpy(grown + have, line, n + 1);
    net->structure = grown;
    return 0;
}

void net_digest(const dt_net *net, char out[17])
{
    const char *s = net->structure ? net->structure : "";
    snprintf(out, 17, "%016llx", (unsigned long long)dt_hash64(s, strlen(s), DT_HASH_INIT));
}

static int parse_line(dt_net *net, char *line, int lineno, const char *where, int *counts, dt_layer **prev)
{
    char *type;
    dt_kv kv[MAX_KV];
    dt_kv *k;
    int n_kv;
    const dt_layer_ops *ops;
    dt_layer *l;

    if ((n_kv = tokenize(line, where, &type, kv)) < 0) return -1;
    if (!type) return 0; /* blank */
    ops = layer_find(type);
    if (!ops) return dt_fail("%s: unknown layer type '%s' (expected one of %s, or a block defined above)", where, type,
                             layer_type_list());

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
            return dt_fail(
                "%s: name '%s': expected letters, digits, '_', '-' or '.', not starting with '.' (at most %d)", where,
                k->val, DT_NAME_MAX - 1);
        strcpy(l->name, k->val);
    } else {
        snprintf(l->name, sizeof l->name, "%s%d", type, counts[type_idx] + 1);
    }
    counts[type_idx]++;
    for (int i = 0; i < net->n_layers - 1; i++)
        if (strcmp(net->layers[i]->name, l->name) == 0)
            return dt_fail("%s: layer name '%s' already used on line %d", where, l->name, net->layers[i]->line);

    if ((k = layer_kv(kv, n_kv, "in")) && ops->max_in == 0)
        return dt_fail("%s: %s takes no inputs (expected no in=, found in=%s)", where, type, k->val);
    if (k) {
        char buf[sizeof k->val], *save = NULL, *tok;
        snprintf(buf, sizeof buf, "%s", k->val);
        if (dt_list_check(k->val, ',') != 0) return dt_fail_prefix("%s: in", where);
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
    long frozen = 0;
    if ((k = layer_kv(kv, n_kv, "frozen")) && dt_parse_long(k->val, 0, 1, "frozen", &frozen) == 0)
        l->frozen = (int)frozen, k->is_default = !frozen;
    else if (k)
        return dt_fail("%s: frozen: expected 0 or 1, found '%s'", where, k->val);
    if (l->n_in < ops->min_in || l->n_in > ops->max_in) {
        if (ops->max_in == 0)
            return dt_fail("%s: %s takes no inputs, found %d", where, type, l->n_in);
        if (l->n_in == 0)
            return dt_fail("%s: %s needs an input, but no layer comes before it (start with an input line)", where,
                           type);
        if (ops->min_in == ops->max_in)
            return dt_fail("%s: %s takes %d input%s, found %d", where, type, ops->min_in, ops->min_in == 1 ? "" : "s",
                           l->n_in);
        return dt_fail("%s: %s expects %d to %d inputs, found %d", where, type, ops->min_in, ops->max_in, l->n_in);
    }
    for (int i = 0; i < l->n_in; i++)
        if (l->in[i]->ops->is_loss)
            return dt_fail("%s: input '%s' is a loss layer; a loss must be the last layer", where, l->in[i]->name);

    if (ops->configure(l, kv, n_kv, where) != 0) return -1;
    for (int i = 0; i < n_kv; i++)
        if (!kv[i].used)
            return dt_fail("%s: %s: unknown key '%s' (expected one of: %s%sname in frozen)", where, type, kv[i].key,
                           ops->keys, ops->keys[0] ? " " : "");
    if (ops->infer(l, where) != 0) return -1;
    if (l->out_size == 0) return dt_fail("%s: %s: output would be empty", where, type);
    if (l->frozen && l->n_params == 0) return dt_fail("%s: frozen=1 on a %s, which has no parameters", where, type);
    for (int i = 0; i < l->n_params; i++) /* frozen weights do not train: they become state */
        if (l->frozen) l->params[i].kind = DT_PARAM_STATE;
    *prev = l;
    return structure_add(net, l, kv, n_kv);
}

/* Checks the whole graph, sets requires_grad / in_accum, lays out the arenas. */
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
        l->requires_grad = 0;
        for (int k = 0; k < l->n_params; k++) l->requires_grad |= l->params[k].kind == DT_PARAM_TRAIN;
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

    int n_all = 0;
    for (int i = 0; i < net->n_layers; i++) n_all += net->layers[i]->n_params;
    net->tensors = calloc((size_t)n_all + 1, sizeof *net->tensors);
    net->states = calloc((size_t)n_all + 1, sizeof *net->states);
    if (!net->tensors || !net->states) return dt_fail("out of memory");
    size_t off = 0, soff = 0;
    net->n_tensors = net->n_states = 0;
    for (int i = net->n_layers - 1; i >= 0; i--) { /* trainable: in the order backward fills them */
        dt_layer *l = net->layers[i];
        for (int k = 0; k < l->n_params; k++)
            if (l->params[k].kind == DT_PARAM_TRAIN) {
                l->params[k].offset = off;
                off += l->params[k].n;
                net->tensors[net->n_tensors++] = &l->params[k];
            }
    }
    for (int i = 0; i < net->n_layers; i++) { /* state: in file order */
        dt_layer *l = net->layers[i];
        for (int k = 0; k < l->n_params; k++)
            if (l->params[k].kind == DT_PARAM_STATE) {
                l->params[k].offset = soff;
                soff += l->params[k].n;
                net->states[net->n_states++] = &l->params[k];
            }
    }
    net->n_params = off;
    net->n_state = soff;
    return 0;
}

/* ---- blocks: "block NAME P1 P2 ... / lines / end", used as "NAME name=X P1=.. P2=.." ---------- */

typedef struct src_line {
    char *text;
    int line;       /* in the file (the use's line for lines a block expanded) */
    char where[160];
} src_line;

typedef struct block_def {
    char name[DT_NAME_MAX];
    int n_params, first, n_lines, line;
    char params[16][32];
} block_def;

typedef struct expander {
    const char *origin;
    char **lines; /* the file's lines, comments removed */
    int n_lines;
    block_def blocks[MAX_BLOCKS];
    int n_blocks;
    src_line *out;
    int n_out, cap_out;
    const block_def *stack[MAX_DEPTH]; /* the blocks being expanded, outermost first */
} expander;

static int emit(expander *x, const char *text, int line, const char *where)
{
    if (x->n_out == MAX_LINES)
        return dt_fail("%s: the net has more than %d layers%s", where, MAX_LINES,
                       x->n_blocks ? " once its blocks are expanded (a block used inside another too often?)" : "");
    if (x->n_out == x->cap_out) {
        int cap = x->cap_out ? 2 * x->cap_out : 64;
        src_line *g = realloc(x->out, sizeof *g * (size_t)cap);
        if (!g) return dt_fail("out of memory");
        x->out = g;
        x->cap_out = cap;
    }
    src_line *s = &x->out[x->n_out];
    if (!(s->text = dt_strdup(text))) return -1;
    s->line = line;
    snprintf(s->where, sizeof s->where, "%s", where);
    x->n_out++;
    return 0;
}

static const block_def *find_block(const expander *x, const char *name)
{
    for (int i = 0; i < x->n_blocks; i++)
        if (strcmp(x->blocks[i].name, name) == 0) return &x->blocks[i];
    return NULL;
}

/* replaces $id in text by the value of id among n (keys, values) */
static int substitute(const char *text, char keys[][32], char vals[][96], int n, const char *where, char *out,
                      size_t cap)
{
    size_t o = 0;
    for (const char *p = text; *p;) {
        if (*p != '$') {
            if (o + 1 >= cap) return dt_fail("%s: line too long after substitution", where);
            out[o++] = *p++;
            continue;
        }
        const char *id = ++p;
        while (isalnum((unsigned char)*p) || *p == '_') p++;
        size_t len = (size_t)(p - id);
        int found = -1;
        for (int i = 0; i < n && found < 0; i++)
            if (strlen(keys[i]) == len && strncmp(keys[i], id, len) == 0) found = i;
        if (found < 0) return dt_fail("%s: $%.*s is not a parameter of the block", where, (int)len, id);
        size_t vl = strlen(vals[found]);
        if (o + vl + 1 >= cap) return dt_fail("%s: line too long after substitution", where);
        memcpy(out + o, vals[found], vl);
        o += vl;
    }
    out[o] = 0;
    return 0;
}

static int expand_line(expander *x, const char *text, int line, const char *where, int depth);

/* a use of block b: "NAME name=X P=V ..." */
static int expand_use(expander *x, const block_def *b, char *text, int line, const char *where, int depth)
{
    char keys[17][32], vals[17][96], *save = NULL, *tok;
    int n = 0, given[17] = {0};
    for (int i = 0; i < depth; i++)
        if (x->stack[i] == b) {
            char chain[400] = "";
            for (int k = i; k < depth; k++)
                snprintf(chain + strlen(chain), sizeof chain - strlen(chain), "%s -> ", x->stack[k]->name);
            return dt_fail("%s:%d: block %s uses itself (%s%s)", x->origin, x->stack[i]->line, b->name, chain, b->name);
        }
    if (depth >= MAX_DEPTH) return dt_fail("%s: blocks nested more than %d deep", where, MAX_DEPTH);
    x->stack[depth] = b;
    strcpy(keys[n++], "name");
    vals[0][0] = 0;
    for (int i = 0; i < b->n_params; i++) {
        strcpy(keys[n], b->params[i]);
        vals[n++][0] = 0;
    }
    strtok_r(text, " \t\r", &save); /* the block's name */
    for (tok = strtok_r(NULL, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1]) return dt_fail("%s: expected key=value, found '%s'", where, tok);
        *eq = 0;
        int i = 0;
        while (i < n && strcmp(keys[i], tok) != 0) i++;
        if (i == n) {
            char list[600] = "name";
            for (int k = 0; k < b->n_params; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), " %s", b->params[k]);
            return dt_fail("%s: block %s has no parameter '%s' (expected: %s)", where, b->name, tok, list);
        }
        if (strlen(eq + 1) >= sizeof vals[i]) return dt_fail("%s: value of '%s' too long", where, tok);
        if (given[i]) return dt_fail("%s: key '%s' given twice", where, tok); /* as on a layer's line */
        strcpy(vals[i], eq + 1);
        given[i] = 1;
    }
    for (int i = 0; i < n; i++)
        if (!given[i]) return dt_fail("%s: block %s needs %s=...", where, b->name, keys[i]);
    for (int k = 0; k < b->n_lines; k++) {
        char out[MAX_LINE], w[2048]; /* where: the whole chain of uses, MAX_DEPTH deep at most */
        int len = snprintf(w, sizeof w, "%s:%d (in block %s, used at %s)", x->origin, b->line + 1 + k, b->name, where);
        if (len >= (int)sizeof w) /* the path is too long for the chain: the innermost line alone */
            snprintf(w, sizeof w, "%s:%d (in block %s)", x->origin, b->line + 1 + k, b->name);
        if (substitute(x->lines[b->first + k], keys, vals, n, w, out, sizeof out) != 0) return -1;
        if (expand_line(x, out, line, w, depth + 1) != 0) return -1;
    }
    return 0;
}

static int expand_line(expander *x, const char *text, int line, const char *where, int depth)
{
    char first[DT_NAME_MAX] = "", copy[MAX_LINE];
    sscanf(text, " %63s", first);
    const block_def *b = first[0] ? find_block(x, first) : NULL;
    if (!b) return emit(x, text, line, where);
    snprintf(copy, sizeof copy, "%s", text);
    return expand_use(x, b, copy, line, where, depth);
}

static int expand(expander *x)
{
    for (int i = 0; i < x->n_lines; i++) {
        char first[DT_NAME_MAX] = "", where[160];
        snprintf(where, sizeof where, "%s:%d", x->origin, i + 1);
        sscanf(x->lines[i], " %63s", first);
        if (strcmp(first, "end") == 0) return dt_fail("%s: 'end' without a block", where);
        if (strcmp(first, "block") != 0) {
            if (expand_line(x, x->lines[i], i + 1, where, 0) != 0) return -1;
            continue;
        }
        /* block NAME P1 P2 ... */
        block_def *b = &x->blocks[x->n_blocks];
        char *save = NULL, *tok, copy[MAX_LINE];
        if (x->n_blocks == MAX_BLOCKS) return dt_fail("%s: more than %d blocks", where, MAX_BLOCKS);
        memset(b, 0, sizeof *b);
        snprintf(copy, sizeof copy, "%s", x->lines[i]);
        strtok_r(copy, " \t\r", &save);
        tok = strtok_r(NULL, " \t\r", &save);
        if (!tok || !valid_name(tok)) return dt_fail("%s: expected 'block NAME PARAM...', a name first", where);
        if (layer_find(tok) || find_block(x, tok)) return dt_fail("%s: block name '%s' is already taken", where, tok);
        snprintf(b->name, sizeof b->name, "%s", tok);
        while ((tok = strtok_r(NULL, " \t\r", &save))) {
            if (b->n_params == 16) return dt_fail("%s: more than 16 block parameters", where);
            if (strlen(tok) >= sizeof b->params[0] || strcmp(tok, "name") == 0)
                return dt_fail("%s: bad block parameter '%s'", where, tok);
            strcpy(b->params[b->n_params++], tok);
        }
        b->line = i + 1;
        b->first = i + 1;
        int j = i + 1;
        for (; j < x->n_lines; j++) {
            char f[DT_NAME_MAX] = "";
            sscanf(x->lines[j], " %63s", f);
            if (strcmp(f, "end") == 0) break;
            if (strcmp(f, "block") == 0) return dt_fail("%s:%d: a block inside a block", x->origin, j + 1);
        }
        if (j == x->n_lines) return dt_fail("%s: block %s has no 'end'", where, b->name);
        b->n_lines = j - i - 1;
        x->n_blocks++;
        i = j;
    }
    return 0;
}

/* Sets out= of the last dense layer (its expanded line) to classes. */
static int set_classes(expander *x, int classes, const char *origin)
{
    for (int i = x->n_out - 1; i >= 0; i--) {
        const char *t = x->out[i].text;
        while (*t == ' ' || *t == '\t') t++;
        if (strncmp(t, "dense", 5) != 0 || (t[5] && t[5] != ' ' && t[5] != '\t')) continue;
        size_t n = strlen(x->out[i].text) + 32;
        char *line = malloc(n), *w = line;
        if (!line) return dt_fail("out of memory");
        for (const char *p = x->out[i].text; *p;) { /* copy every token but out=... */
            const char *e = p + strcspn(p, " \t");
            if (strncmp(p, "out=", 4) != 0) w += sprintf(w, "%.*s ", (int)(e - p), p);
            p = e + strspn(e, " \t");
        }
        sprintf(w, "out=%d", classes);
        free(x->out[i].text);
        x->out[i].text = line;
        return 0;
    }
    return dt_fail("%s: no dense layer to size to --classes %d (expected the net to end in dense and a loss)", origin,
                   classes);
}

int net_parse(const char *text, const char *origin, const char *name, dt_net **out)
{
    return net_parse_classes(text, origin, name, 0, out);
}

int net_parse_classes(const char *text, const char *origin, const char *name, int classes, dt_net **out)
{
    dt_net *net = calloc(1, sizeof *net);
    expander x;
    int counts[64] = {0}, rc = -1;
    dt_layer *prev = NULL;
    const char *p = strncmp(text, "\xef\xbb\xbf", 3) ? text : text + 3; /* a UTF-8 byte-order mark */
    memset(&x, 0, sizeof x);
    x.origin = origin;
    if (!net) return dt_fail("out of memory");
    snprintf(net->origin, sizeof net->origin, "%s", origin);
    snprintf(net->name, sizeof net->name, "%s", name);
    while (*p) { /* the lines, comments cut */
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= MAX_LINE) {
            dt_fail("%s:%d: line longer than %d characters", origin, x.n_lines + 1, MAX_LINE - 1);
            goto out;
        }
        char **g = realloc(x.lines, sizeof *g * (size_t)(x.n_lines + 1));
        if (!g) {
            dt_fail("out of memory");
            goto out;
        }
        x.lines = g;
        if (!(x.lines[x.n_lines] = malloc(len + 1))) {
            dt_fail("out of memory");
            goto out;
        }
        memcpy(x.lines[x.n_lines], p, len);
        x.lines[x.n_lines][len] = 0;
        char *hash = strchr(x.lines[x.n_lines], '#');
        if (hash) *hash = 0;
        x.n_lines++;
        p += len + (nl ? 1 : 0);
    }
    if (expand(&x) != 0) goto out;
    if (classes > 0 && set_classes(&x, classes, origin) != 0) goto out;
    for (int i = 0; i < x.n_out; i++)
        if (parse_line(net, x.out[i].text, x.out[i].line, x.out[i].where, counts, &prev) != 0) goto out;
    if (finish(net, origin) != 0) goto out;
    if (classes > 0 && net_n_classes(net) != classes) {
        dt_fail("%s: its loss takes %d classes after the last dense layer was sized to --classes %d (expected the "
                "last dense layer to feed the loss)",
                origin, net_n_classes(net), classes);
        goto out;
    }
    rc = 0;
out:
    for (int i = 0; i < x.n_lines; i++) free(x.lines[i]);
    for (int i = 0; i < x.n_out; i++) free(x.out[i].text);
    free(x.lines);
    free(x.out);
    if (rc != 0) {
        net_destroy(net);
        return -1;
    }
    *out = net;
    return 0;
}

int net_load(const char *name_or_path, dt_net **out) { return net_load_classes(name_or_path, 0, out); }

int net_is_path(const char *name_or_path)
{
    size_t len = strlen(name_or_path);
    return strchr(name_or_path, '/') || (len > 4 && strcmp(name_or_path + len - 4, ".net") == 0);
}

int net_load_classes(const char *name_or_path, int classes, dt_net **out)
{
    if (!net_is_path(name_or_path)) {
        const char *text = net_builtin_text(name_or_path);
        char origin[128];
        if (!text)
            return dt_fail("--net: unknown net '%s' (expected one of %s, or a path to a .net file)", name_or_path,
                           net_builtin_list());
        snprintf(origin, sizeof origin, "built-in net %s", name_or_path); /* not a path: no file of that name is read */
        return net_parse_classes(text, origin, name_or_path, classes, out);
    }
    char *text, base[DT_NAME_MAX];
    const char *slash = strrchr(name_or_path, '/');
    const char *b = slash ? slash + 1 : name_or_path;
    size_t bl = strlen(b);
    if (bl > 4 && strcmp(b + bl - 4, ".net") == 0) bl -= 4;
    if (bl >= sizeof base) bl = sizeof base - 1;
    memcpy(base, b, bl);
    base[bl] = 0;
    size_t n;
    if (dt_read_text(name_or_path, (size_t)64 << 20, "net file", &text, &n) != 0) return dt_fail_prefix("--net");
    const char *nul = memchr(text, 0, n);
    if (nul) {
        size_t at = (size_t)(nul - text);
        free(text);
        return dt_fail("%s: a NUL byte at offset %zu (expected a text file: see dtrain-net(5))", name_or_path, at);
    }
    int rc = net_parse_classes(text, name_or_path, base, classes, out);
    free(text);
    return rc;
}

static int needs_dy(const dt_net *net, const dt_layer *l) { return l->requires_grad && l != net->loss; }

/* A layer's output gradient is live from the backward of its first consumer (backward runs in
 * reverse) to its own backward. Gradients whose lives do not overlap share a buffer: replaying
 * the backward order, a gradient takes the smallest free buffer that fits it (or grows the
 * largest free one) when it is born and gives it back when it dies. A deep net then holds about
 * as many gradient buffers as a residual block is long, not one per layer. */
static int alloc_grads(dt_net *net, dt_backend *be)
{
    int n = net->n_layers, n_slots = 0, rc = -1;
    int *slot = malloc(sizeof(int) * (size_t)n), *is_free = calloc((size_t)n, sizeof(int));
    size_t *need = calloc((size_t)n, sizeof(size_t)), *size = calloc((size_t)n, sizeof(size_t));
    if (!slot || !is_free || !need || !size) {
        dt_fail("out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        slot[i] = -1;
        need[i] = layer_act_size(net->layers[i], be, net->max_batch);
    }
    for (int i = n - 1; i >= 1; i--) {
        dt_layer *l = net->layers[i];
        if (l->fused) { /* its input's gradient is its own: one buffer, live until the input's backward */
            slot[i - 1] = slot[i];
            continue;
        }
        for (int k = 0; k < l->n_in; k++) {
            int src = 0;
            while (net->layers[src] != l->in[k]) src++;
            if (!needs_dy(net, l->in[k]) || slot[src] >= 0) continue;
            int fit = -1, big = -1;
            for (int s = 0; s < n_slots; s++) {
                if (!is_free[s]) continue;
                if (size[s] >= need[src] && (fit < 0 || size[s] < size[fit])) fit = s;
                if (big < 0 || size[s] > size[big]) big = s;
            }
            int s = fit >= 0 ? fit : big >= 0 ? big : n_slots++;
            if (size[s] < need[src]) size[s] = need[src];
            is_free[s] = 0;
            slot[src] = s;
        }
        if (slot[i] >= 0) is_free[slot[i]] = 1;
    }
    if (!(net->dy_bufs = calloc((size_t)n_slots + 1, sizeof(float *)))) {
        dt_fail("out of memory");
        goto out;
    }
    net->n_dy_bufs = n_slots;
    for (int s = 0; s < n_slots; s++)
        if (!(net->dy_bufs[s] = be->alloc(be, size[s] * sizeof(float)))) goto out;
    for (int i = 0; i < n; i++) net->layers[i]->dy = slot[i] >= 0 ? net->dy_bufs[slot[i]] : NULL;
    rc = 0;
out:
    free(slot);
    free(is_free);
    free(need);
    free(size);
    return rc;
}

/* What net_alloc will ask the backend for, at least: the arenas (weights, gradients, state) and
 * every layer's output and the largest output gradient, for max_batch rows. */
static double memory_needed(const dt_net *net, dt_backend *be, double *arenas, double *acts)
{
    double largest = 0.0;
    *arenas = 4.0 * (2.0 * (double)net->n_params + (double)net->n_state);
    *acts = 0.0;
    for (int i = 0; i < net->n_layers; i++) {
        double n = 4.0 * (double)layer_act_size(net->layers[i], be, net->max_batch);
        *acts += n;
        largest = n > largest ? n : largest;
    }
    *acts += largest;
    return *arenas + *acts;
}

int net_check_memory(dt_net *net, dt_backend *be, int max_batch, double *bytes)
{
    double arenas, acts, need;
    size_t avail = 0, total = 0;
    net->be = be;
    net->max_batch = max_batch < 1 ? 1 : max_batch;
    for (int i = 0; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        l->layout = DT_LAYOUT_PLAIN;
        if (i > 0 && l->out.n_dims == 3) l->layout = be->layout_for(be, l->out.d[0], l->out.d[1], l->out.d[2]);
    }
    need = memory_needed(net, be, &arenas, &acts);
    if (bytes) *bytes = need;
    if (be->memory && be->memory(be, &avail, &total) == 0 && need > (double)avail)
        return dt_fail("%s: needs at least %.3g GB on %s (%.3g GB of weights, gradients and state; %.3g GB of "
                       "activations for %d samples per rank), and %.3g GB of its %.3g GB are free (expected a smaller "
                       "--batch or net)",
                       net->origin, need / 1e9, be->name, arenas / 1e9, acts / 1e9, net->max_batch, (double)avail / 1e9,
                       (double)total / 1e9);
    return 0;
}

/* Where the backend fuses them, a batchnorm (fuses_bn_relu) or a two-input add (add2) and the relu
 * right after it that alone consumes it run as one layer: two passes over the activations fewer,
 * bit for bit the same results. DTRAIN_FUSE=0 runs every layer on its own. */
static void fuse_layers(dt_net *net, dt_backend *be)
{
    const char *env = getenv("DTRAIN_FUSE");
    int on = !(env && strcmp(env, "0") == 0);
    const dt_layer_ops *bn = layer_find("batchnorm"), *add = layer_find("add"), *relu = layer_find("relu");
    for (int i = 0; i < net->n_layers; i++) net->layers[i]->fuse_relu = net->layers[i]->fused = 0;
    for (int i = 1; on && i + 1 < net->n_layers; i++) {
        dt_layer *l = net->layers[i], *r = net->layers[i + 1];
        int can = (l->ops == bn && be->fuses_bn_relu) || (l->ops == add && l->n_in == 2 && be->add2);
        if (!can || r->ops != relu || r->in[0] != l || l->layout != r->layout) continue;
        int others = 0;
        for (int j = i + 2; j < net->n_layers; j++)
            for (int k = 0; k < net->layers[j]->n_in; k++) others |= net->layers[j]->in[k] == l;
        if (!others) l->fuse_relu = r->fused = 1;
    }
}

/* the only layer that consumes l's output, NULL where none or several do */
static dt_layer *sole_consumer(const dt_net *net, int i)
{
    dt_layer *l = net->layers[i], *user = NULL;
    for (int j = i + 1; j < net->n_layers; j++)
        for (int k = 0; k < net->layers[j]->n_in; k++)
            if (net->layers[j]->in[k] == l) {
                if (user) return NULL;
                user = net->layers[j];
            }
    return user;
}

/* whether every layer that consumes layer i's output (one at least) takes it in bf16, in its layout */
static int consumers_take_bf16(const dt_net *net, int i, dt_backend *be)
{
    const dt_layer *l = net->layers[i];
    int users = 0;
    for (int j = i + 1; j < net->n_layers; j++) {
        dt_layer *u = net->layers[j];
        for (int k = 0; k < u->n_in; k++)
            if (u->in[k] == l) {
                if (u->layout != l->layout || !u->ops->takes_bf16 || !u->ops->takes_bf16(u, be)) return 0;
                users++;
                break;
            }
    }
    return users > 0;
}

/* Activations in bf16 (layer.h's y_bf16), where the backend stores them so: a convolution whose
 * only consumer is a batchnorm of its layout (its y and dy; the convolution's alloc asks the
 * backend); a batchnorm, and a two-input add under add2_bf16 (the residual stream), each with the
 * relu fused into it, whose consumers all take bf16 (its y): convolutions that round their input to
 * bf16 anyway (the same bits), adds and shortcuts (the stream rounded, as under PyTorch's autocast).
 * DTRAIN_BF16_EDGES=0: none. */
static void mark_bf16_edges(dt_net *net, dt_backend *be)
{
    const char *env = getenv("DTRAIN_BF16_EDGES");
    int on = !(env && strcmp(env, "0") == 0);
    const dt_layer_ops *conv = layer_find("conv"), *bn = layer_find("batchnorm"), *add = layer_find("add");
    for (int i = 0; i < net->n_layers; i++) net->layers[i]->y_bf16 = 0;
    for (int i = 0; on && i < net->n_layers; i++) {
        dt_layer *l = net->layers[i], *out = l->fuse_relu ? net->layers[i + 1] : l; /* the relu fused into it */
        int last = l->fuse_relu ? i + 1 : i;
        if (l->ops == conv) {
            dt_layer *user = sole_consumer(net, last);
            l->y_bf16 = user && user->ops == bn && user->layout == l->layout && be->conv_bf16_out != NULL;
        } else if ((l->ops == bn || (l->ops == add && l->n_in == 2 && be->add2_bf16)) &&
                   consumers_take_bf16(net, last, be))
            l->y_bf16 = out->y_bf16 = 1;
    }
}

int net_alloc(dt_net *net, dt_backend *be, int max_batch)
{
    if (net_check_memory(net, be, max_batch, NULL) != 0) return -1;
    fuse_layers(net, be);
    mark_bf16_edges(net, be);
    for (int i = 0; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        size_t n = layer_act_size(l, be, net->max_batch);
        if (l->fused) l->y = l->in[0]->y;
        else if (!(l->y = be->alloc(be, n * sizeof(float)))) return -1;
    }
    if (alloc_grads(net, be) != 0) return -1;
    if (!(net->w = be->alloc(be, DT_MAX(net->n_params, 1) * sizeof(float)))) return -1;
    if (!(net->g = net->g_own = be->alloc(be, DT_MAX(net->n_params, 1) * sizeof(float)))) return -1;
    if (!(net->state = be->alloc(be, DT_MAX(net->n_state, 1) * sizeof(float)))) return -1;
    if (!(net->labels = be->alloc(be, (size_t)net->max_batch * sizeof(int32_t)))) return -1;
    for (int t = 0; t < net->n_tensors; t++) {
        net->tensors[t]->w = net->w + net->tensors[t]->offset;
        net->tensors[t]->g = net->g + net->tensors[t]->offset;
    }
    for (int t = 0; t < net->n_states; t++) {
        net->states[t]->w = net->state + net->states[t]->offset;
        net->states[t]->g = NULL;
    }
    for (int i = 0; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        if (l->ops->alloc && l->ops->alloc(l, be, net->max_batch) != 0)
            return dt_fail_prefix("%s:%d: %s '%s'", net->origin, l->line, l->ops->type, l->name);
    }
    return 0;
}

static int init_tensor(dt_backend *be, dt_param *p, uint64_t seed)
{
    float *h = dt_malloc(p->n * sizeof(float));
    dt_rng rng;
    double a;
    if (!h) return -1;
    rng_seed(&rng, seed, rng_stream_id(p->name));
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
    int rc = be->to_device(be, p->w, h, p->n * sizeof(float));
    free(h);
    return rc;
}

int net_init_params(dt_net *net, uint64_t seed)
{
    for (int t = 0; t < net->n_tensors; t++)
        if (init_tensor(net->be, net->tensors[t], seed) != 0) return -1;
    for (int t = 0; t < net->n_states; t++)
        if (init_tensor(net->be, net->states[t], seed) != 0) return -1;
    return 0;
}

int net_set_input(dt_net *net, const float *host, int rows)
{
    return net->be->to_device(net->be, net->input->y, host, (size_t)rows * net->input->out_size * sizeof(float));
}

int net_set_labels(dt_net *net, const int32_t *host, int rows)
{
    return net->be->to_device(net->be, net->labels, host, (size_t)rows * sizeof(int32_t));
}

int net_copy_batch(dt_net *net, const float *x, const int32_t *y, int rows)
{
    size_t n = rows > 0 ? (size_t)rows : 0;
    dt_backend *be = net->be;
    return be->copy(be, net->input->y, x, n * net->input->out_size * sizeof(float)) != 0 ||
                   be->copy(be, net->labels, y, n * sizeof(int32_t)) != 0
               ? -1
               : 0;
}

int net_forward(dt_net *net, dt_pass *p)
{
    if (p->rows <= 0) return 0;
    for (int i = 1; i < net->n_layers; i++) {
        dt_layer *l = net->layers[i];
        if (!l->fused && l->ops->forward(l, net->be, p) != 0) return dt_fail_prefix("%s forward", l->name);
    }
    return 0;
}

int net_backward(dt_net *net, dt_pass *p, net_ready_fn ready, void *arg)
{
    for (int i = net->n_layers - 1; i >= 1; i--) {
        dt_layer *l = net->layers[i];
        if (p->rows > 0 && !l->fused && (l->requires_grad || l == net->loss) && l->ops->backward(l, net->be, p) != 0)
            return dt_fail_prefix("%s backward", l->name);
        const dt_param *last = NULL;
        for (int k = 0; k < l->n_params; k++)
            if (l->params[k].kind == DT_PARAM_TRAIN) {
                /* no samples on this rank: its gradient contribution is zero */
                if (p->rows <= 0 && net->be->scale(net->be, l->params[k].g, 0.0f, l->params[k].n) != 0)
                    return dt_fail_prefix("%s backward", l->name);
                last = &l->params[k];
            }
        if (last && ready) ready(arg, last->offset + last->n);
    }
    return 0;
}

dt_arena net_arena(const dt_net *net)
{
    dt_arena a = {net->w, net->g, net->n_params, net->n_tensors, net->tensors, net->be};
    return a;
}

void net_set_grad_arena(dt_net *net, float *g)
{
    net->g = g;
    for (int t = 0; t < net->n_tensors; t++) net->tensors[t]->g = g + net->tensors[t]->offset;
}

int net_n_classes(const dt_net *net) { return (int)net->loss->out_size; }

size_t net_n_weights(const dt_net *net)
{
    size_t n = net->n_params;
    for (int t = 0; t < net->n_states; t++)
        if (!net->states[t]->average) n += net->states[t]->n;
    return n;
}

dt_param *net_find_tensor(const dt_net *net, const char *name)
{
    for (int t = 0; t < net->n_tensors; t++)
        if (strcmp(net->tensors[t]->name, name) == 0) return net->tensors[t];
    for (int t = 0; t < net->n_states; t++)
        if (strcmp(net->states[t]->name, name) == 0) return net->states[t];
    return NULL;
}

void net_print(const dt_net *net, FILE *f)
{
    fprintf(f, "%-24s %-13s %-14s %12s\n", "layer", "type", "output", "parameters");
    for (int i = 0; i < net->n_layers; i++) {
        const dt_layer *l = net->layers[i];
        char shape[48];
        size_t n = 0;
        for (int k = 0; k < l->n_params; k++) n += l->params[k].average ? 0 : l->params[k].n;
        shape_format(&l->out, shape, sizeof shape);
        fprintf(f, "%-24s %-13s %-14s %12zu%s\n", l->name, l->ops->type, shape, n, l->frozen ? " (frozen)" : "");
    }
    fprintf(f, "%-24s %-13s %-14s %12zu (%zu trained)\n", "total", "", "", net_n_weights(net), net->n_params);
}
