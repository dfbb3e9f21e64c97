/* ckpt — what a checkpoint holds, how the ranks assemble it and take it back, and the file.
 *
 * A checkpoint (safetensors, F32 tensors, written by rank 0 atomically) holds:
 *   NAME                  the net's trained weights and state tensors (running statistics
 *                         averaged over the workers, frozen weights): a checkpoint is also a
 *                         weight file for --load
 *   optim:momentum:NAME   the optimizer's momentum of each trained tensor (momentum > 0)
 *   rank:R:NAME           rank R's own running statistics (several workers)
 *   comm:R:BUF            rank R's communication state: residuals and momentum-correction
 *                         buffers of the sparse modes, Pipe-SGD's gradients in flight, a
 *                         parameter server's part of the momentum and under SSP of the weights
 *                         (ps: the optimizer steps on the servers; optim:momentum is then rank
 *                         0's, a worker's, unused) ...
 * and metadata: net, dataset, training samples, mode, ranks, iteration (iterations done),
 * options (the canonical options, without epochs and iters) and under --precision fp16 the loss
 * scale and its good steps in a row (loss_scale, loss_scale_good), and where the epoch stands
 * (epoch_sums: what its log records have summed so far, so that a resumed epoch's records are those
 * of the run that never stopped). The order of the data, dropout
 * masks and augmentation draws are functions of (seed, epoch, iteration, sample), so the
 * iteration is all a resume needs of them: it continues with exactly the batch that came next.
 */
#include "ckpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "util.h"

#define CKPT_FORMAT WEIGHTS_CKPT_FORMAT
#define CKPT_VERSION "2" /* 2: the checksum covers the metadata, names and shapes too */

/* every rank learns whether any failed; r->failed_rank holds the lowest that did */
#define AGREE(r, rc) ((r)->failed_rank = comm_agree((r)->comm, (rc) != 0), (r)->failed_rank >= 0)

#define TAG_LIST 7001
#define TAG_DATA 7002
#define MAX_MODE_STATE 16
#define NAME_LEN 256

/* A rank's own tensors: its running statistics and its mode's buffers. */
typedef struct own {
    int n;
    char (*name)[NAME_LEN];
    float **data; /* host */
    size_t *len;
    float *stats; /* host copy of the running statistics (their own storage) */
    dt_param **stat_param; /* the state tensor behind entry i, NULL for mode buffers */
} own;

static void own_free(own *o)
{
    free(o->name);
    free(o->data);
    free(o->len);
    free(o->stat_param);
    dt_free(o->stats);
    memset(o, 0, sizeof *o);
}

static int has_stats(const dt_ckpt_state *r)
{
    for (int t = 0; t < r->net->n_states; t++)
        if (r->net->states[t]->average) return 1;
    return 0;
}

/* Lists this rank's own tensors; with_stats: include the running statistics (copied to host). */
static int own_list(dt_ckpt_state *r, int with_stats, own *o)
{
    dt_state_tensor ms[MAX_MODE_STATE];
    int n_mode = 0, me = comm_rank(r->comm);
    size_t stat_n = 0;
    memset(o, 0, sizeof *o);
    if (r->mode->state && (n_mode = r->mode->state(r->mode_state, r->env, ms, MAX_MODE_STATE)) < 0) return -1;
    int cap = n_mode + r->net->n_states + 1;
    o->name = calloc((size_t)cap, sizeof *o->name);
    o->data = calloc((size_t)cap, sizeof *o->data);
    o->len = calloc((size_t)cap, sizeof *o->len);
    o->stat_param = calloc((size_t)cap, sizeof *o->stat_param);
    if (!o->name || !o->data || !o->len || !o->stat_param) return dt_fail("out of memory");
    if (with_stats) {
        for (int t = 0; t < r->net->n_states; t++) stat_n += r->net->states[t]->average ? r->net->states[t]->n : 0;
        if (!(o->stats = dt_alloc((stat_n + 1) * sizeof(float)))) return -1;
        size_t off = 0;
        for (int t = 0; t < r->net->n_states; t++) {
            dt_param *p = r->net->states[t];
            if (!p->average) continue;
            snprintf(o->name[o->n], NAME_LEN, "rank:%d:%.200s", me, p->name);
            o->data[o->n] = o->stats + off;
            o->len[o->n] = p->n;
            o->stat_param[o->n++] = p;
            if (r->be->to_host(r->be, o->stats + off, p->w, p->n * sizeof(float)) != 0) return -1;
            off += p->n;
        }
    }
    for (int i = 0; i < n_mode; i++) {
        snprintf(o->name[o->n], NAME_LEN, "comm:%d:%.47s", me, ms[i].name);
        o->data[o->n] = ms[i].data;
        o->len[o->n++] = ms[i].n;
    }
    return 0;
}

/* ---- writing ------------------------------------------------------------------------------------ */

typedef struct gathered {
    int n;
    char (*name)[NAME_LEN];
    float **data;
    size_t *len;
} gathered;

/* rank r > 0 sends its list (count, names, lengths) and then the data */
static int send_own(dt_ckpt_state *r, const own *o)
{
    uint64_t n = (uint64_t)o->n;
    if (comm_send(r->comm, &n, sizeof n, 0, TAG_LIST) != 0) return -1;
    if (n && (comm_send(r->comm, o->name, n * NAME_LEN, 0, TAG_LIST) != 0 ||
              comm_send(r->comm, o->len, n * sizeof(size_t), 0, TAG_LIST) != 0))
        return -1;
    for (int i = 0; i < o->n; i++)
        if (comm_send(r->comm, o->data[i], o->len[i] * sizeof(float), 0, TAG_DATA) != 0) return -1;
    return 0;
}

static int recv_own(dt_ckpt_state *r, int src, gathered *g)
{
    uint64_t n;
    if (comm_recv(r->comm, &n, sizeof n, src, TAG_LIST, NULL, NULL) != 0) return -1;
    char(*names)[NAME_LEN] = calloc(n + 1, NAME_LEN);
    size_t *lens = calloc(n + 1, sizeof *lens);
    int rc = 0;
    if (!names || !lens) rc = dt_fail("out of memory");
    if (rc == 0 && n && (comm_recv(r->comm, names, n * NAME_LEN, src, TAG_LIST, NULL, NULL) != 0 ||
                         comm_recv(r->comm, lens, n * sizeof(size_t), src, TAG_LIST, NULL, NULL) != 0))
        rc = -1;
    char(*gn)[NAME_LEN] = rc == 0 ? realloc(g->name, (size_t)(g->n + (int)n + 1) * NAME_LEN) : NULL;
    if (gn) g->name = gn;
    float **gd = gn ? realloc(g->data, sizeof *g->data * (size_t)(g->n + (int)n + 1)) : NULL;
    if (gd) g->data = gd;
    size_t *gl = gd ? realloc(g->len, sizeof *g->len * (size_t)(g->n + (int)n + 1)) : NULL;
    if (gl) g->len = gl;
    if (rc == 0 && !gl) rc = dt_fail("out of memory");
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        float *d = dt_alloc((lens[i] + 1) * sizeof(float));
        if (!d || comm_recv(r->comm, d, lens[i] * sizeof(float), src, TAG_DATA, NULL, NULL) != 0) {
            dt_free(d);
            rc = -1;
            break;
        }
        memcpy(g->name[g->n], names[i], NAME_LEN);
        g->name[g->n][NAME_LEN - 1] = 0;
        g->data[g->n] = d;
        g->len[g->n++] = lens[i];
    }
    free(names);
    free(lens);
    return rc;
}

/* options text all without the lines that begin with one of the prefixes in skip (NULL-terminated) */
static char *options_without(const char *all, const char *const *skip)
{
    char *out, *o;
    if (!(out = o = malloc(strlen(all) + 1))) return NULL;
    for (const char *line = all; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        int keep = 1;
        for (const char *const *k = skip; *k; k++)
            if (strncmp(line, *k, strlen(*k)) == 0) keep = 0;
        if (keep) {
            memcpy(o, line, len);
            o += len;
        }
        line += len;
    }
    *o = 0;
    return out;
}

char *ckpt_options_resolved(const char *text, const char *dataset, const char *mode, int classes)
{
    const dt_mode_desc *m = mode ? mode_find(mode) : NULL;
    const char *codec = m && m->default_compress ? m->default_compress : "none";
    size_t cap = strlen(text) + strlen(dataset) + strlen(codec) + 32;
    char *out = malloc(cap), *o = out;
    if (!out) return NULL;
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n"), room = cap - (size_t)(o - out);
        if (len == strlen("dataset = ") && !strncmp(line, "dataset = ", len))
            o += snprintf(o, room, "dataset = %s", dataset);
        else if (len == strlen("compress = ") && !strncmp(line, "compress = ", len))
            o += snprintf(o, room, "compress = %s", codec);
        else if (len == strlen("classes = 0") && !strncmp(line, "classes = 0", len))
            o += snprintf(o, room, "classes = %d", classes);
        else
            memcpy(o, line, len), o += len;
        line += len;
        if (*line == '\n') *o++ = *line++;
    }
    *o = 0;
    return out;
}

/* the options a checkpoint records: without epochs and iters, as a resumed run may run longer */
static char *options_text(const dt_ckpt_state *r)
{
    static const char *const skip[] = {"epochs = ", "iters = ", NULL};
    return options_without(r->options, skip);
}

/* the value of the line "key = value" in an options text, into out (def where there is none) */
static void option_value(const char *all, const char *key, const char *def, char *out, size_t n)
{
    size_t kl = strlen(key);
    snprintf(out, n, "%s", def);
    for (const char *line = all; *line;) {
        size_t len = strcspn(line, "\n");
        if (len > kl + 3 && strncmp(line, key, kl) == 0 && strncmp(line + kl, " = ", 3) == 0) {
            snprintf(out, n, "%.*s", (int)(len - kl - 3), line + kl + 3);
            return;
        }
        line += len + (line[len] == '\n');
    }
}

int ckpt_save(dt_ckpt_state *r, long done, const char *path)
{
    dt_net *net = r->net;
    int me = comm_rank(r->comm), p = comm_size(r->comm), rc;
    int with_stats = has_stats(r) && r->env->n_workers > 1;
    own mine;
    gathered g = {0};
    float *host = NULL, *avg = NULL;
    size_t n = net->n_params, ns = net->n_state;

    rc = own_list(r, with_stats && r->env->is_worker, &mine);
    if (AGREE(r, rc)) goto out_fail;
    /* the running statistics averaged over the workers (left as they are on every rank) */
    if (!(avg = dt_alloc((ns + 1) * sizeof(float)))) rc = -1;
    if (AGREE(r, rc)) goto out_fail;
    rc = r->be->to_host(r->be, avg, net->state, ns * sizeof(float));
    if (AGREE(r, rc)) goto out_fail;
    if (with_stats) {
        for (int t = 0; t < net->n_states; t++) {
            const dt_param *q = net->states[t];
            if (!q->average) continue;
            if (!r->env->is_worker) memset(avg + q->offset, 0, q->n * sizeof(float));
            if (comm_allreduce_sum_f32(r->comm, avg + q->offset, q->n) != 0) goto out_fail;
            for (size_t i = 0; i < q->n; i++) avg[q->offset + i] /= (float)r->env->n_workers;
        }
    }
    if (me != 0) {
        rc = send_own(r, &mine);
    } else {
        for (int src = 1; src < p && rc == 0; src++) rc = recv_own(r, src, &g);
        int cap = net->n_tensors * 2 + net->n_states + mine.n + g.n + 1, k = 0;
        st_tensor *t = calloc((size_t)cap, sizeof *t);
        char (*names)[NAME_LEN] = calloc((size_t)cap, NAME_LEN);
        if (rc == 0 && (!t || !names || !(host = dt_alloc((2 * n + 1) * sizeof(float))))) rc = dt_fail("out of memory");
        if (rc == 0) {
            if (r->be->to_host(r->be, host, net->w, n * sizeof(float)) != 0 ||
                (r->momentum && r->be->to_host(r->be, host + n, r->momentum, n * sizeof(float)) != 0))
                rc = -1;
            /* a diverged run must not replace the last good checkpoint */
            if (rc == 0 && weights_check_finite(net, host, avg, "the weights") != 0)
                rc = dt_fail("%s not written at iteration %ld: %s (the file keeps the last good checkpoint)", path,
                             done, dt_errmsg());
        }
        if (rc == 0) {
            for (int i = 0; i < net->n_tensors; i++) {
                const dt_param *q = net->tensors[i];
                t[k] = (st_tensor){q->name, q->n_dims, {0}, host + q->offset, NULL};
                for (int d = 0; d < q->n_dims; d++) t[k].shape[d] = q->dims[d];
                k++;
            }
            for (int i = 0; i < net->n_states; i++) {
                const dt_param *q = net->states[i];
                t[k] = (st_tensor){q->name, q->n_dims, {0}, avg + q->offset, NULL};
                for (int d = 0; d < q->n_dims; d++) t[k].shape[d] = q->dims[d];
                k++;
            }
            for (int i = 0; r->momentum && i < net->n_tensors; i++) {
                const dt_param *q = net->tensors[i];
                snprintf(names[k], NAME_LEN, "optim:momentum:%.200s", q->name);
                t[k] = (st_tensor){names[k], q->n_dims, {0}, host + n + q->offset, NULL};
                for (int d = 0; d < q->n_dims; d++) t[k].shape[d] = q->dims[d];
                k++;
            }
            for (int i = 0; i < mine.n; i++, k++)
                t[k] = (st_tensor){mine.name[i], 1, {(int64_t)mine.len[i]}, mine.data[i], NULL};
            for (int i = 0; i < g.n; i++, k++) t[k] = (st_tensor){g.name[i], 1, {(int64_t)g.len[i]}, g.data[i], NULL};
            char it[32], ranks[16], samples[32], fp[20], scale[32], good[32],
                sums[DT_CKPT_EPOCH_SUMS * 26] = "", *opts = options_text(r);
            for (int i = 0; i < DT_CKPT_EPOCH_SUMS; i++)
                snprintf(sums + strlen(sums), sizeof sums - strlen(sums), "%s%.17g", i ? " " : "", r->epoch_sums[i]);
            snprintf(it, sizeof it, "%ld", done);
            snprintf(ranks, sizeof ranks, "%d", p);
            snprintf(samples, sizeof samples, "%zu", r->train_samples);
            snprintf(fp, sizeof fp, "%016llx", (unsigned long long)r->data_fingerprint);
            snprintf(scale, sizeof scale, "%.17g", r->loss_scale ? *r->loss_scale : 0.0);
            snprintf(good, sizeof good, "%ld", r->scale_good ? *r->scale_good : 0);
            const char *mk[] = {"net",        "net_structure",  "dataset",   "train_samples", "data_fingerprint",
                                "mode",       "ranks",          "iteration", "options",       "epoch_sums",
                                "loss_scale", "loss_scale_good"};
            const char *layers = net->structure ? net->structure : "";
            const char *mv[] = {net->name, layers, r->dataset,       samples, fp,    r->mode->name,
                                ranks,     it,     opts ? opts : "", sums,    scale, good};
            int n_meta = (int)DT_ARRAY_LEN(mk) - (r->loss_scale ? 0 : 2);
            rc = opts ? ckpt_write(path, t, k, mk, mv, n_meta) : dt_fail("out of memory");
            free(opts);
        }
        free(t);
        free(names);
    }
    if (AGREE(r, rc)) goto out_fail;
    rc = 0;
    goto out;
out_fail:
    if (rc == 0) dt_fail("checkpoint %s: another rank failed", path);
    rc = -1;
out:
    for (int i = 0; i < g.n; i++) dt_free(g.data[i]);
    free(g.name);
    free(g.data);
    free(g.len);
    own_free(&mine);
    dt_free(host);
    dt_free(avg);
    return rc;
}

/* ---- resuming ---------------------------------------------------------------------------------- */

/* the first line where two option texts differ */
static void first_difference(const char *a, const char *b, char *out, size_t n)
{
    while (*a || *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || strncmp(a, b, la) != 0) {
            snprintf(out, n, "the checkpoint has '%.*s', this run '%.*s'", (int)la, a, (int)lb, b);
            return;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
    }
    snprintf(out, n, "(no difference found)");
}

int ckpt_check_meta(dt_ckpt_state *r, const st_file *f, const char *path, long *it, long *ranks)
{
    dt_net *net = r->net;
    char why[1200];
    const char *m_net = st_meta(f, "net"), *m_ds = st_meta(f, "dataset"), *m_mode = st_meta(f, "mode"),
               *m_it = st_meta(f, "iteration"), *m_ranks = st_meta(f, "ranks"), *m_opts = st_meta(f, "options"),
               *m_samples = st_meta(f, "train_samples");
    if (!m_net || !m_ds || !m_mode || !m_it || !m_ranks || !m_opts || !m_samples)
        return dt_fail("%s: checkpoint metadata incomplete (expected net, dataset, mode, ranks, iteration, options)",
                       path);
    if (strcmp(m_net, net->name) != 0)
        return dt_fail("%s: a checkpoint of net %s, not %s (expected the net it was made with)", path, m_net,
                       net->name);
    const char *m_struct = st_meta(f, "net_structure"); /* none: a checkpoint from before it was kept */
    if (m_struct && net->structure && strcmp(m_struct, net->structure) != 0) {
        first_difference(m_struct, net->structure, why, sizeof why);
        return dt_fail("%s: made with other layers in net %s: %s (expected the net it was made with; or start a new "
                       "run from its weights with --load)",
                       path, net->name, why);
    }
    /* the precision (with fp16's loss-scale settings) and the transport may change: weights and
     * optimizer state are fp32 under every precision, and the same on every transport */
    static const char *const skip[] = {"epochs = ",     "iters = ",          "precision = ",
                                       "fp16-scale = ", "fp16-scale-window = ", "transport = ", NULL};
    char *ours0 = options_without(r->options, skip), *theirs0 = options_without(m_opts, skip);
    char *ours = ours0 ? ckpt_options_resolved(ours0, r->dataset ? r->dataset : "", r->mode ? r->mode->name : m_mode,
                                               net_n_classes(net))
                       : NULL;
    char *theirs = theirs0 ? ckpt_options_resolved(theirs0, m_ds, m_mode, net_n_classes(net)) : NULL;
    free(ours0), free(theirs0);
    if (!ours || !theirs) {
        free(ours), free(theirs);
        return dt_fail("out of memory");
    }
    int same = strcmp(ours, theirs) == 0;
    if (!same) first_difference(theirs, ours, why, sizeof why);
    free(ours), free(theirs);
    if (!same)
        return dt_fail("%s: made with other options: %s (resume with the same options, except --epochs, --iters, "
                       "--precision and --transport; or start a new run from its weights with --load)",
                       path, why);
    /* none: a checkpoint from before --precision */
    option_value(m_opts, "precision", "fp32", r->precision_was, sizeof r->precision_was);
    char samples[32];
    snprintf(samples, sizeof samples, "%zu", r->train_samples);
    if (r->train_samples && strcmp(samples, m_samples) != 0)
        return dt_fail("%s: made on %s training samples of %s, this run has %s (expected the same data)", path,
                       m_samples, m_ds, samples);
    const char *m_fp = st_meta(f, "data_fingerprint"); /* none: a checkpoint from before it was kept */
    char fp[20];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)r->data_fingerprint);
    if (r->train_samples && r->data_fingerprint && m_fp && strcmp(m_fp, fp) != 0)
        return dt_fail("%s: made on other data of the same size (%s's fingerprint %s, this run's %s; expected the same "
                       "samples and labels)",
                       path, m_ds, m_fp, fp);
    if (dt_parse_long(m_it, 0, 1L << 50, "iteration", it) != 0 ||
        dt_parse_long(m_ranks, 1, 1 << 24, "ranks", ranks) != 0)
        return dt_fail_prefix("%s: checkpoint metadata", path);
    return 0;
}

/* a checkpoint of made_by ranks that holds per-rank state, resumed on `ranks` */
static int other_ranks(const char *path, long made_by, int ranks, const dt_mode_desc *mode)
{
    return dt_fail("%s: made by %ld ranks, this run has %d (resume %s with %ld ranks: it keeps per-rank state)", path,
                   made_by, ranks, mode ? mode->name : "its mode", made_by);
}

int ckpt_peek(dt_ckpt_state *r, const char *path, int ranks, long *it)
{
    st_file *f;
    long made_by;
    if (ckpt_open(path, &f) != 0) return -1;
    int rc = ckpt_check_meta(r, f, path, it, &made_by), per_rank = 0;
    for (int i = 0; rc == 0 && i < f->n; i++) per_rank |= strncmp(f->e[i].name, "comm:", 5) == 0;
    if (rc == 0 && per_rank && made_by != ranks) {
        r->usage_error = 1;
        rc = other_ranks(path, made_by, ranks, r->mode);
    }
    st_close(f);
    return rc;
}

/* A tensor of the checkpoint beside the weights (momentum, a rank's own state) is all finite numbers:
 * a NaN there would turn the weights into NaN some steps later, far from its cause */
static int own_finite(const char *path, const char *name, const void *data, size_t n)
{
    const uint8_t *b = data; /* the file's bytes: a float there need not be aligned */
    for (size_t k = 0; k < n; k++) {
        float x;
        memcpy(&x, b + k * sizeof x, sizeof x);
        if (!isfinite(x))
            return dt_fail("%s: tensor '%s' holds a non-finite value ([%zu] is %g; is the file damaged or edited?)",
                           path, name, k, (double)x);
    }
    return 0;
}

/* Whether the entry e of a rank's own tensor of n floats is missing or of another type or size */
static int own_entry_bad(const st_entry *e, size_t n)
{
    return !e || strcmp(e->dtype, "F32") != 0 || e->end - e->begin != n * sizeof(float);
}

static int own_entry_fail(const char *path, const st_entry *e, const char *name, size_t n, int src)
{
    char who[32] = "";
    if (src > 0) snprintf(who, sizeof who, " for rank %d", src);
    if (!e)
        return dt_fail("%s: no tensor '%s' of %zu values%s (made with other options or ranks?)", path, name, n, who);
    return dt_fail("%s: tensor '%s' is %s in %llu bytes%s (expected F32 of %zu values; is the file damaged or edited?)",
                   path, name, e->dtype, (unsigned long long)(e->end - e->begin), who, n);
}

/* rank 0: the file's checks, the shared tensors into host, the iteration */
static int open_checked(dt_ckpt_state *r, const char *path, st_file **out, float *w, float *state, float *v, long *it0,
                        long *ranks, double *scale)
{
    st_file *f;
    dt_net *net = r->net;
    if (ckpt_open(path, &f) != 0) return -1;
    *out = f;
    if (ckpt_check_meta(r, f, path, it0, ranks) != 0) return -1;
    const char *m_sums = st_meta(f, "epoch_sums"); /* none: a checkpoint from before they were kept */
    for (int i = 0; m_sums && i < DT_CKPT_EPOCH_SUMS; i++) {
        char *end;
        r->epoch_sums[i] = strtod(m_sums, &end);
        if (end == m_sums || !isfinite(r->epoch_sums[i]) || r->epoch_sums[i] < 0 ||
            *end != (i + 1 < DT_CKPT_EPOCH_SUMS ? ' ' : 0))
            return dt_fail("%s: checkpoint metadata: epoch_sums is '%s' (expected %d numbers: is the file damaged?)",
                           path, st_meta(f, "epoch_sums"), DT_CKPT_EPOCH_SUMS);
        m_sums = end;
    }
    /* fp16's loss scale: none in a checkpoint written in another precision (the run's own stays) */
    const char *m_scale = st_meta(f, "loss_scale"), *m_good = st_meta(f, "loss_scale_good");
    if (m_scale && m_good) {
        long good;
        if (dt_parse_double(m_scale, 1e-300, 1e300, "loss_scale", &scale[0]) != 0 ||
            dt_parse_long(m_good, 0, 1L << 50, "loss_scale_good", &good) != 0)
            return dt_fail_prefix("%s: checkpoint metadata", path);
        scale[1] = (double)good;
    }
    if (weights_from(net, f, path, w, state, NULL) != 0) return -1;
    /* dtrain writes no checkpoint of non-finite weights (ckpt_write checks): one is damaged or edited */
    if (weights_check_finite(net, w, state, path) != 0) return -1;
    if (v) {
        char name[NAME_LEN + 32];
        for (int i = 0; i < net->n_tensors; i++) {
            const dt_param *q = net->tensors[i];
            snprintf(name, sizeof name, "optim:momentum:%.200s", q->name);
            const st_entry *e = st_find(f, name);
            if (!e)
                return dt_fail("%s: no momentum for %s (expected '%s' of %zu values: was it made with --momentum 0?)",
                               path, q->name, name, q->n);
            uint64_t count = 1;
            for (int d = 0; d < e->n_dims; d++) count *= (uint64_t)e->shape[d];
            if (strcmp(e->dtype, "F32") != 0 || count != q->n || e->end - e->begin != q->n * sizeof(float))
                return dt_fail("%s: tensor '%s' is %s of %llu values in %llu bytes (expected F32 of %zu values, as %s; "
                               "is the file damaged or edited?)",
                               path, name, e->dtype, (unsigned long long)count, (unsigned long long)(e->end - e->begin),
                               q->n, q->name);
            memcpy(v + q->offset, f->data + e->begin, q->n * sizeof(float));
            if (own_finite(path, name, v + q->offset, q->n) != 0) return -1;
        }
    }
    return 0;
}

/* rank 0 answers rank src's request for its own tensors (status, then the data) */
static int serve_own(dt_ckpt_state *r, const st_file *f, const char *path, int src)
{
    uint64_t n, status = 0;
    int rc = 0;
    if (comm_recv(r->comm, &n, sizeof n, src, TAG_LIST, NULL, NULL) != 0) return -1;
    char(*names)[NAME_LEN] = calloc(n + 1, NAME_LEN);
    size_t *lens = calloc(n + 1, sizeof *lens);
    if (!names || !lens) {
        free(names), free(lens);
        return dt_fail("out of memory");
    }
    if (n && (comm_recv(r->comm, names, n * NAME_LEN, src, TAG_LIST, NULL, NULL) != 0 ||
              comm_recv(r->comm, lens, n * sizeof(size_t), src, TAG_LIST, NULL, NULL) != 0))
        rc = -1;
    for (uint64_t i = 0; rc == 0 && i < n && !status; i++) {
        names[i][NAME_LEN - 1] = 0;
        const st_entry *e = st_find(f, names[i]);
        if (own_entry_bad(e, lens[i])) {
            status = 1;
            own_entry_fail(path, e, names[i], lens[i], src);
        } else if (own_finite(path, names[i], f->data + e->begin, lens[i]) != 0) {
            status = 1;
        }
    }
    if (rc == 0 && comm_send(r->comm, &status, sizeof status, src, TAG_DATA) != 0) rc = -1;
    for (uint64_t i = 0; rc == 0 && !status && i < n; i++) {
        const st_entry *e = st_find(f, names[i]);
        if (comm_send(r->comm, f->data + e->begin, lens[i] * sizeof(float), src, TAG_DATA) != 0) rc = -1;
    }
    free(names);
    free(lens);
    return rc != 0 ? -1 : status ? -1 : 0;
}

int ckpt_restore(dt_ckpt_state *r, const char *path, long *it0_out)
{
    dt_net *net = r->net;
    int me = comm_rank(r->comm), p = comm_size(r->comm), rc = 0;
    size_t n = net->n_params, ns = net->n_state;
    float *host = dt_alloc((2 * n + ns + 1) * sizeof(float)), *state = host ? host + 2 * n : NULL;
    float *v = r->momentum && host ? host + n : NULL;
    long meta[2] = {0, 0}; /* iteration, ranks */
    double scale[2] = {0, 0}; /* fp16's loss scale and good steps (0: not in the checkpoint) */
    st_file *f = NULL;
    own mine = {0};
    if (!host) rc = -1;
    if (rc == 0 && me == 0) rc = open_checked(r, path, &f, host, state, v, &meta[0], &meta[1], scale);
    if (AGREE(r, rc)) goto fail;
    if (comm_bcast(r->comm, meta, sizeof meta, 0) != 0 || comm_bcast(r->comm, scale, sizeof scale, 0) != 0 ||
        comm_bcast(r->comm, r->epoch_sums, sizeof r->epoch_sums, 0) != 0 ||
        comm_bcast(r->comm, host, (2 * n + ns) * sizeof(float), 0) != 0)
        goto fail;
    if (r->loss_scale && scale[0] > 0) *r->loss_scale = scale[0], *r->scale_good = (long)scale[1];
    rc = r->be->to_device(r->be, net->w, host, n * sizeof(float));
    if (rc == 0) rc = r->be->to_device(r->be, net->state, state, ns * sizeof(float));
    if (rc == 0 && v) rc = r->be->to_device(r->be, r->momentum, v, n * sizeof(float));
    if (AGREE(r, rc)) goto fail;

    /* this rank's own tensors: its running statistics (same ranks only), its mode's buffers */
    int same_ranks = meta[1] == p, with_stats = same_ranks && has_stats(r) && r->env->n_workers > 1;
    rc = own_list(r, with_stats && r->env->is_worker, &mine);
    if (rc == 0 && !same_ranks && mine.n > 0)
        rc = other_ranks(path, meta[1], p, r->mode);
    if (AGREE(r, rc)) {
        r->usage_error = !same_ranks; /* on every rank (a PS server keeps no state of its own): the rank count */
        goto fail;
    }
    if (me == 0) {
        for (int i = 0; i < mine.n && rc == 0; i++) {
            const st_entry *e = st_find(f, mine.name[i]);
            if (own_entry_bad(e, mine.len[i]))
                rc = own_entry_fail(path, e, mine.name[i], mine.len[i], 0);
            else {
                memcpy(mine.data[i], f->data + e->begin, mine.len[i] * sizeof(float));
                rc = own_finite(path, mine.name[i], mine.data[i], mine.len[i]);
            }
        }
        for (int src = 1; src < p; src++)
            if (serve_own(r, f, path, src) != 0) rc = -1;
    } else {
        uint64_t cnt = (uint64_t)mine.n, status = 1;
        rc = comm_send(r->comm, &cnt, sizeof cnt, 0, TAG_LIST);
        if (rc == 0 && cnt && (comm_send(r->comm, mine.name, cnt * NAME_LEN, 0, TAG_LIST) != 0 ||
                               comm_send(r->comm, mine.len, cnt * sizeof(size_t), 0, TAG_LIST) != 0))
            rc = -1;
        if (rc == 0) rc = comm_recv(r->comm, &status, sizeof status, 0, TAG_DATA, NULL, NULL);
        if (rc == 0 && status) rc = dt_fail("%s: rank 0 could not find this rank's state", path);
        for (int i = 0; rc == 0 && i < mine.n; i++)
            rc = comm_recv(r->comm, mine.data[i], mine.len[i] * sizeof(float), 0, TAG_DATA, NULL, NULL);
    }
    for (int i = 0; rc == 0 && i < mine.n; i++) /* running statistics back to the device */
        if (mine.stat_param[i])
            rc = r->be->to_device(r->be, mine.stat_param[i]->w, mine.data[i], mine.len[i] * sizeof(float));
    if (rc == 0 && r->mode->restored) rc = r->mode->restored(r->mode_state, r->env, meta[0]);
    if (AGREE(r, rc)) goto fail;
    *it0_out = meta[0];
    own_free(&mine);
    st_close(f);
    dt_free(host);
    return 0;
fail:
    if (rc == 0) dt_fail("--resume %s: another rank failed", path);
    own_free(&mine);
    st_close(f);
    dt_free(host);
    return -1;
}

/* ---- the file ---------------------------------------------------------------------------------- */

/* The checksum of a checkpoint: every metadata pair but the checksum itself, in order, then every
 * tensor's name, shape and data. */
static uint64_t meta_sum(const char *const *keys, const char *const *vals, int n)
{
    uint64_t h = DT_HASH_INIT;
    for (int i = 0; i < n; i++) {
        if (strcmp(keys[i], "checksum") == 0) continue;
        h = dt_hash64(keys[i], strlen(keys[i]) + 1, h);
        h = dt_hash64(vals[i], strlen(vals[i]) + 1, h);
    }
    return h;
}

int ckpt_write(const char *path, const st_tensor *t, int n, const char *const *mk, const char *const *mv, int n_meta)
{
    const char *keys[32], *vals[32];
    char sum[32];
    int k = 0, at;
    if (n_meta > 28) return dt_fail("internal: too much checkpoint metadata");
    keys[k] = "format", vals[k++] = CKPT_FORMAT;
    keys[k] = "version", vals[k++] = CKPT_VERSION;
    keys[k] = "producer", vals[k++] = "dtrain " PACKAGE_VERSION;
    at = k, keys[k] = "checksum", vals[k++] = "";
    for (int i = 0; i < n_meta; i++) keys[k] = mk[i], vals[k++] = mv[i];
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)st_checksum_tensors(meta_sum(keys, vals, k), t, n));
    vals[at] = sum;
    return st_write(path, t, n, keys, vals, k);
}

int ckpt_open(const char *path, st_file **out)
{
    st_file *f;
    char sum[32];
    if (st_read(path, &f) != 0) return -1;
    const char *format = st_meta(f, "format"), *version = st_meta(f, "version"), *want = st_meta(f, "checksum");
    if (!format || strcmp(format, CKPT_FORMAT) != 0) {
        if (format && strcmp(format, WEIGHTS_FORMAT) == 0)
            dt_fail("%s: a weight file, not a checkpoint (expected --load for weight files)", path);
        else
            dt_fail("%s: no dtrain checkpoint metadata (expected a file written by --checkpoint)", path);
        st_close(f);
        return -1;
    }
    if (!version || strcmp(version, CKPT_VERSION) != 0) {
        dt_fail("%s: checkpoint version %s (this dtrain reads version %s)", path, version ? version : "missing",
                CKPT_VERSION);
        st_close(f);
        return -1;
    }
    uint64_t h = meta_sum((const char *const *)f->meta_keys, (const char *const *)f->meta_vals, f->n_meta);
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)st_checksum_file(h, f));
    if (!want || strcmp(want, sum) != 0) {
        dt_fail("%s: checksum %s of the header and data, the header says %s (the file is damaged)", path, sum,
                want ? want : "nothing");
        st_close(f);
        return -1;
    }
    *out = f;
    return 0;
}
