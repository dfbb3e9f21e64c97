/* The registry of backends: built-in ones, and modules loaded on first use.
 *
 * A module is a shared object dtrain-NAME.so exporting dtrain_backend_module (backend.h). It is
 * looked for, in order, in the directories of $DTRAIN_MODULE_PATH (colon-separated), beside the
 * running binary (the build tree) and in the install's library directory (PKGLIBDIR), so a build
 * with CUDA loads its libraries only when --device asks for them and runs everywhere else. A
 * module calls back into the binary (dtrain is linked with --export-dynamic), never into a copy
 * of the library of its own.
 */
#include "backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../registry.h"
#include "../util.h"

#ifndef PKGLIBDIR
#define PKGLIBDIR "/usr/local/lib/dtrain"
#endif
#ifndef DT_CUDA_BUILT
#define DT_CUDA_BUILT 0
#endif

static int cpu_available(char *why, size_t n)
{
    (void)why, (void)n;
    return 1;
}

static int cpu_create(dt_backend **out, const dt_backend_opts *o) { return backend_cpu_create_with(out, o); }

static const dt_backend_desc cpu_desc = {
    .name = "cpu",
    .help = "this machine's CPU cores: oneDNN kernels on an OpenMP pool",
    .available = cpu_available,
    .create = cpu_create,
    .describe = backend_cpu_describe,
};

/* A kind the registry knows: built in (desc), or a module (file) loaded on demand. */
typedef struct kind {
    const char *name;
    const char *module;    /* file name of the module; NULL: built in */
    const char *not_built; /* why this build has no module for it; NULL: it was built */
    int hidden;
    const dt_backend_desc *desc; /* once found */
    char why[PATH_MAX + 1024];   /* why it could not be loaded (after a failed try) */
    int tried;
} kind;

static kind cpu_kind = {.name = "cpu", .desc = &cpu_desc};
static kind cuda_kind = {.name = "cuda",
                         .module = "dtrain-cuda.so",
                         .not_built = DT_CUDA_BUILT ? NULL : "not built into this dtrain"};
static kind guarded_kind = {.name = "cpu-guarded", .module = "dtrain-cpu-guarded.so", .hidden = 1};
static kind *const kinds[] = {&cpu_kind, &cuda_kind, &guarded_kind};
static const dt_registry registry = DT_REGISTRY("backend", kinds);

#define MAX_REGISTERED 4
static const dt_backend_desc *registered[MAX_REGISTERED];
static int n_registered;

int backend_register(const dt_backend_desc *d)
{
    if (n_registered == MAX_REGISTERED) return dt_fail("internal: too many registered backends");
    registered[n_registered++] = d;
    return 0;
}

static kind *find_kind(const char *name) { return (kind *)registry_find(&registry, name); }

/* why kind k cannot be used (after backend_find failed on it) */
static const char *kind_reason(const kind *k) { return k->not_built ? k->not_built : k->why; }

const char *backend_list(void)
{
    static char buf[128];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < DT_ARRAY_LEN(kinds); i++)
            if (!kinds[i]->hidden)
                off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", off ? ", " : "", kinds[i]->name);
    }
    return buf;
}

/* The directory of the running binary ("" if unknown). */
static void exe_dir(char *out, size_t n)
{
    char path[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    out[0] = 0;
    if (len <= 0) return;
    path[len] = 0;
    char *slash = strrchr(path, '/');
    if (slash) *slash = 0;
    snprintf(out, n, "%s", path);
}

/* Tries to load k's module from each directory; fills k->desc or k->why. */
static void load_module(kind *k)
{
    char dirs[4096], exe[PATH_MAX], looked[1024] = "", *save = NULL;
    const char *env = getenv("DTRAIN_MODULE_PATH");
    exe_dir(exe, sizeof exe);
    snprintf(dirs, sizeof dirs, "%s%s%s:%s", env ? env : "", env ? ":" : "", exe, PKGLIBDIR);
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char path[PATH_MAX + 64];
        if (strlen(d) >= PATH_MAX) continue;
        if (!*d) continue;
        snprintf(path, sizeof path, "%s/%s", d, k->module);
        snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "%s%s", looked[0] ? ", " : "", d);
        if (access(path, F_OK) != 0) continue;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) { /* present but unusable: a library it needs is missing, most often */
            snprintf(k->why, sizeof k->why, "%s cannot be loaded: %s", path, dlerror());
            return;
        }
        dt_backend_module_fn fn;
        void *sym = dlsym(h, "dtrain_backend_module");
        memcpy(&fn, &sym, sizeof fn);
        const dt_backend_desc *desc = fn ? fn(DT_BACKEND_ABI) : NULL;
        if (!desc || strcmp(desc->name, k->name) != 0) {
            snprintf(k->why, sizeof k->why, "%s is not a dtrain %s backend module for this version (ABI %d)", path,
                     k->name, DT_BACKEND_ABI);
            dlclose(h);
            return;
        }
        k->desc = desc; /* the module stays loaded for the life of the process */
        return;
    }
    snprintf(k->why, sizeof k->why, "module %s not found (looked in %s)", k->module, looked);
}

int backend_known(const char *name)
{
    for (int i = 0; i < n_registered; i++)
        if (strcmp(registered[i]->name, name) == 0) return 1;
    return find_kind(name) != NULL;
}

void backend_list_devices(FILE *f)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(kinds); i++) {
        const dt_backend_desc *d = backend_find(kinds[i]->name);
        char why[512] = "";
        if (kinds[i]->hidden && !d) continue;
        if (!d) {
            fprintf(f, "%-12s no: %s\n", kinds[i]->name, kind_reason(kinds[i]));
            continue;
        }
        int ok = d->available(why, sizeof why);
        fprintf(f, "%-12s %s%s: %s\n", d->name, ok ? "yes" : "no: ", ok ? "" : why, d->describe());
        if (d->verified) fprintf(f, "%-12s %s\n", "", d->verified);
        if (ok && d->list_devices) d->list_devices(f);
    }
}

const dt_backend_desc *backend_find(const char *name)
{
    for (int i = 0; i < n_registered; i++)
        if (strcmp(registered[i]->name, name) == 0) return registered[i];
    kind *k = find_kind(name);
    if (!k) {
        dt_fail("unknown backend '%s' (expected one of %s)", name, backend_list());
        return NULL;
    }
    if (!k->desc && !k->not_built && !k->tried) {
        k->tried = 1;
        load_module(k);
    }
    if (!k->desc) dt_fail("backend %s: %s", name, kind_reason(k));
    return k->desc;
}

int backend_create(const char *name, const dt_backend_opts *o, dt_backend **out)
{
    char why[512] = "";
    const dt_backend_desc *d = backend_find(name);
    if (!d) return -1;
    if (!d->available(why, sizeof why)) return dt_fail("backend %s: %s", name, why);
    return d->create(out, o);
}

/* Whether the NVIDIA driver's library loads (why not, if not). Without it the CUDA module cannot run,
 * and loading it (cuBLAS, cuDNN and their start-up) costs a fifth of a second at each start of a
 * CPU run, several seconds under sanitizers: --device auto asks this first. */
static int cuda_driver_loads(char *why, size_t n)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        snprintf(why, n, "no NVIDIA driver (%s)", dlerror());
        return 0;
    }
    dlclose(h);
    return 1;
}

const char *backend_auto(char *why, size_t n)
{
    char reason[512] = "";
    if (!find_kind("cuda")->not_built && !cuda_driver_loads(reason, sizeof reason)) {
        snprintf(why, n, "cuda: %s", reason);
        return "cpu";
    }
    const dt_backend_desc *d = backend_find("cuda");
    if (d && d->available(reason, sizeof reason)) {
        snprintf(why, n, "%s", "");
        return "cuda";
    }
    if (d) snprintf(why, n, "cuda: %s", reason);
    else snprintf(why, n, "cuda: %s", kind_reason(find_kind("cuda")));
    dt_err_clear();
    return "cpu";
}

int backend_queue(dt_backend *be, dt_backend **q)
{
    *q = be;
    return be->queue_create ? be->queue_create(be, q) : 0;
}

void backend_queue_free(dt_backend *be, dt_backend *q)
{
    if (q && q != be && be->queue_free) be->queue_free(be, q);
}

const char *backend_describe(const dt_backend *be)
{
    const dt_backend_desc *d = backend_find(be->name);
    return d ? d->describe() : "";
}

size_t backend_peak_memory(const dt_backend *be)
{
    const dt_backend_desc *d = be->host_memory ? NULL : backend_find(be->name);
    return d && d->peak_memory ? d->peak_memory(be) : 0;
}

void *backend_host_alloc(dt_backend *be, size_t bytes)
{
    if (bytes == 0) bytes = 1;
    return be->host_alloc ? be->host_alloc(be, bytes) : dt_zalloc(bytes);
}

void backend_host_free(dt_backend *be, void *p)
{
    if (!p) return;
    if (be->host_free)
        be->host_free(be, p);
    else
        dt_free(p);
}

static void *host_alloc_cb(void *ctx, size_t bytes) { return backend_host_alloc(ctx, bytes); }
static void host_free_cb(void *ctx, void *p) { backend_host_free(ctx, p); }

dt_host_allocator backend_host_allocator(dt_backend *be)
{
    return (dt_host_allocator){.alloc = host_alloc_cb, .free = host_free_cb, .ctx = be};
}

void backend_destroy(dt_backend *be)
{
    if (be) be->destroy(be);
}
