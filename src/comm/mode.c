/* The table of modes. A new mode is a new file and one line here. */
#include "mode.h"

#include <stdio.h>
#include <string.h>

#include "../util.h"

extern const dt_mode_desc mode_dsync, mode_ps, mode_pipesgd, mode_topk, mode_gtopk, mode_csc, mode_terngrad;

static const dt_mode_desc *const modes[] = {&mode_dsync, &mode_ps,   &mode_pipesgd, &mode_topk,
                                            &mode_gtopk, &mode_csc, &mode_terngrad};

const dt_mode_desc *mode_find(const char *name)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(modes); i++)
        if (strcmp(modes[i]->name, name) == 0) return modes[i];
    return NULL;
}

int mode_count(void) { return (int)DT_ARRAY_LEN(modes); }
const dt_mode_desc *mode_at(int i) { return modes[i]; }

const char *mode_list(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < DT_ARRAY_LEN(modes); i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", modes[i]->name);
    }
    return buf;
}

int mode_reads(const dt_mode_desc *m, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = m->options; p && *p;) {
        const char *sp = strchr(p, ' ');
        size_t len = sp ? (size_t)(sp - p) : strlen(p);
        if (len == n && strncmp(p, flag, n) == 0) return 1;
        p += len + (sp ? 1 : 0);
    }
    return 0;
}

int mode_env_views(dt_mode_env *env)
{
    env->be = env->optim->be;
    if (hostbuf_view(&env->gh, env->be, env->arena.g, env->arena.n) != 0 ||
        hostbuf_view(&env->wh, env->be, env->arena.w, env->arena.n) != 0)
        return -1;
    return 0;
}

void mode_env_release(dt_mode_env *env)
{
    hostbuf_free(&env->gh);
    hostbuf_free(&env->wh);
}

static int staged(const dt_hostbuf *h, size_t off, size_t n, double *seconds, int push)
{
    if (h->host == h->dev) return 0;
    double t0 = dt_now();
    int rc = push ? hostbuf_push(h, off, n) : hostbuf_pull(h, off, n);
    *seconds += dt_now() - t0;
    return rc;
}

int mode_pull(const dt_hostbuf *h, size_t off, size_t n, double *seconds) { return staged(h, off, n, seconds, 0); }
int mode_push(const dt_hostbuf *h, size_t off, size_t n, double *seconds) { return staged(h, off, n, seconds, 1); }

int mode_roles(const dt_mode_desc *m, dt_mode_env *env)
{
    if (m->roles) return m->roles(env);
    env->is_worker = 1;
    env->n_workers = comm_size(env->comm);
    env->worker_rank = comm_rank(env->comm);
    return 0;
}
