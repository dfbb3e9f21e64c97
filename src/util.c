#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char errbuf[8192]; /* room for a few paths of PATH_MAX */

size_t dt_utf8_len(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned cp;
    int n;
    if (u[0] < 0x80) return u[0] != 0;
    if (u[0] >= 0xc2 && u[0] <= 0xdf)
        n = 1, cp = u[0] & 0x1fu;
    else if (u[0] >= 0xe0 && u[0] <= 0xef)
        n = 2, cp = u[0] & 0x0fu;
    else if (u[0] >= 0xf0 && u[0] <= 0xf4)
        n = 3, cp = u[0] & 0x07u;
    else
        return 0;
    for (int i = 1; i <= n; i++) { /* stops at the terminator: it is no continuation byte */
        if ((u[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (u[i] & 0x3fu);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0; /* overlong, beyond Unicode, or a surrogate */
    return (size_t)n + 1;
}

/* src into errbuf with the bytes a terminal would act on or cannot show (control characters but
 * newline and tab, DEL, bytes of no valid UTF-8 character: a file name's Latin-1, say) written as
 * \xNN; cut with '~' at errbuf's end. */
static void set_error(const char *src)
{
    size_t o = 0, cap = sizeof errbuf;
    while (*src && o + 5 < cap) {
        unsigned char ch = (unsigned char)*src;
        size_t n = dt_utf8_len(src);
        if (n == 0 || (ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f) {
            o += (size_t)snprintf(errbuf + o, cap - o, "\\x%02x", ch);
            src++;
        } else {
            memcpy(errbuf + o, src, n);
            o += n, src += n;
        }
    }
    if (*src) errbuf[o++] = '~'; /* mark the cut */
    errbuf[o] = 0;
}

int dt_fail(const char *fmt, ...)
{
    char msg[sizeof errbuf]; /* an argument may be dt_errmsg() itself: the message it had */
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof msg, fmt, ap) >= (int)sizeof msg) msg[sizeof msg - 2] = '~';
    va_end(ap);
    set_error(msg);
    return -1;
}

int dt_fail_prefix(const char *fmt, ...)
{
    char prefix[4608], msg[sizeof errbuf + sizeof prefix + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s: %s", prefix, errbuf);
    set_error(msg);
    return -1;
}

const char *dt_errmsg(void) { return errbuf[0] ? errbuf : "unknown error"; }
void dt_err_clear(void) { errbuf[0] = 0; }

double dt_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double dt_cpu_process(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void *dt_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (posix_memalign(&p, 64, (bytes + 63) / 64 * 64) != 0) {
        dt_fail("out of memory (expected to allocate %zu bytes)", bytes);
        return NULL;
    }
    return p;
}

void *dt_zalloc(size_t bytes)
{
    void *p = dt_alloc(bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void dt_free(void *p) { free(p); }

void *dt_host_alloc(const dt_host_allocator *a, size_t bytes)
{
    return a && a->alloc ? a->alloc(a->ctx, bytes) : dt_zalloc(bytes);
}

void dt_host_free(const dt_host_allocator *a, void *p)
{
    if (!p) return;
    if (a && a->free)
        a->free(a->ctx, p);
    else
        dt_free(p);
}

void *dt_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) dt_fail("out of memory (expected to allocate %zu bytes)", bytes);
    return p;
}

char *dt_strdup(const char *s)
{
    char *p = strdup(s);
    if (!p) dt_fail("out of memory");
    return p;
}

int dt_is_decimal(const char *s, int integer)
{
    const unsigned char *p = (const unsigned char *)s;
    int digits = 0;
    if (*p == '+' || *p == '-') p++;
    for (; isdigit(*p); p++) digits++;
    if (!integer && *p == '.')
        for (p++; isdigit(*p); p++) digits++;
    if (!digits) return 0;
    if (!integer && (*p == 'e' || *p == 'E')) {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit(*p)) return 0;
        while (isdigit(*p)) p++;
    }
    return *p == 0;
}

size_t dt_utf8_invalid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!len || i + len > n || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) return i;
        for (size_t k = 1; k < len; k++)
            if ((p[i + k] & 0xc0) != 0x80) return i;
        /* overlong 3- and 4-byte forms, UTF-16 surrogates, beyond U+10FFFF */
        if ((len == 3 && ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] > 0x9f))) ||
            (len == 4 && ((c == 0xf0 && p[i + 1] < 0x90) || (c == 0xf4 && p[i + 1] > 0x8f))))
            return i;
        i += len;
    }
    return n;
}

int dt_list_check(const char *list, char sep)
{
    size_t n = strlen(list);
    int empty = n == 0 || list[0] == sep || list[n - 1] == sep;
    for (size_t i = 1; i < n; i++) empty |= list[i] == sep && list[i - 1] == sep;
    return empty ? dt_fail("'%s' has an empty item (expected items separated by '%c', none of them empty)", list, sep)
                 : 0;
}

int dt_parse_long(const char *s, long lo, long hi, const char *what, long *out)
{
    long v;
    if (!s || !*s) return dt_fail("%s: expected an integer in [%ld, %ld], found an empty value", what, lo, hi);
    if (!dt_is_decimal(s, 1)) return dt_fail("%s: expected an integer in [%ld, %ld], found '%s'", what, lo, hi, s);
    errno = 0;
    v = strtol(s, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
        return dt_fail("%s: expected an integer in [%ld, %ld], found %s", what, lo, hi, s);
    *out = v;
    return 0;
}

int dt_parse_double(const char *s, double lo, double hi, const char *what, double *out)
{
    double v;
    if (!s || !*s) return dt_fail("%s: expected a number in [%g, %g], found an empty value", what, lo, hi);
    int inf = isinf(hi) && !strcmp(s, "inf"); /* a bound without limit, as --fusion-bytes's default */
    if (!inf && !dt_is_decimal(s, 0)) return dt_fail("%s: expected a number in [%g, %g], found '%s'", what, lo, hi, s);
    errno = 0;
    v = strtod(s, NULL);
    if (errno == ERANGE) /* beyond a double, or below its smallest (where strtod gives 0 or a denormal) */
        return dt_fail("%s: expected a number in [%g, %g], found %s, %s", what, lo, hi, s,
                       fabs(v) < 1.0 ? "too close to 0 for a double (it would be read as 0)"
                                     : "beyond what a double holds");
    if (v < lo || v > hi) return dt_fail("%s: expected a number in [%g, %g], found %s", what, lo, hi, s);
    *out = v;
    return 0;
}

const char *dt_file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISLNK(m) ? "a symbolic link" : S_ISCHR(m) || S_ISBLK(m) ? "a device"
           : S_ISFIFO(m) ? "a pipe" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int dt_is_kind(const char *path, int dir)
{
    struct stat st;
    return stat(path, &st) == 0 && (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

int dt_host_memory(size_t *avail, size_t *total)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb;
    int found = 0;
    if (!f) return dt_fail("cannot read /proc/meminfo");
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) *avail = (size_t)kb * 1024, found |= 1;
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) *total = (size_t)kb * 1024, found |= 2;
    }
    fclose(f);
    return found == 3 ? 0 : dt_fail("/proc/meminfo has no MemAvailable and MemTotal");
}

FILE *dt_fdopen_blocking(int fd, const char *mode)
{
    FILE *f = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 ? fdopen(fd, mode) : NULL;
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

FILE *dt_fopen_regular(const char *path, mode_t *kind)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    *kind = 0;
    if (fd < 0) return NULL;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        *kind = st.st_mode;
        return NULL;
    }
    return dt_fdopen_blocking(fd, "rb");
}

int dt_read_text(const char *path, size_t max, const char *what, char **data, size_t *n_bytes)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size > max)
        return dt_fail("%s: %.1f MB, larger than any %s can be (at most %zu MB)", path, st.st_size / 1e6, what,
                       max >> 20);
    return dt_read_file(path, data, n_bytes);
}

int dt_read_file(const char *path, char **data, size_t *n_bytes)
{
    /* opened without blocking, so that a named pipe is refused below instead of waiting in open()
     * for a writer (forever, and past a SIGTERM) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    FILE *f;
    char *buf;
    long n;
    if (fd < 0) return dt_fail("%s: cannot open (%s)", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dt_fail("%s: cannot stat (%s)", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return dt_fail("%s: %s (expected a file)", path, dt_file_kind(st.st_mode));
    }
    if (!(f = dt_fdopen_blocking(fd, "rb"))) return dt_fail("%s: cannot open (%s)", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return dt_fail("%s: cannot determine the size (%s)", path, strerror(errno));
    }
    if (n == 0) { /* a file the kernel makes as it is read (/proc): its size says 0, so read to the end */
        size_t cap = 4096, got = 0, k;
        buf = dt_malloc(cap + 1);
        while (buf && (k = fread(buf + got, 1, cap - got, f)) > 0) {
            got += k;
            if (got == cap && cap < (64u << 20)) {
                char *more = realloc(buf, 2 * cap + 1);
                if (!more) free(buf);
                buf = more, cap *= 2;
            } else if (got == cap) {
                break; /* 64 MiB: more than any file dtrain reads this way */
            }
        }
        int e = ferror(f) ? errno : 0;
        fclose(f);
        if (!buf) return dt_fail("%s: out of memory", path);
        if (e) {
            free(buf);
            return dt_fail("%s: read failed (%s)", path, strerror(e));
        }
        buf[got] = 0;
        *data = buf;
        if (n_bytes) *n_bytes = got;
        return 0;
    }
    buf = dt_malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return dt_fail("%s: %.1f GB, more than this host can read into memory (out of memory)", path, n / 1e9);
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        int e = errno;
        fclose(f);
        free(buf);
        return dt_fail("%s: read failed (%s)", path, e ? strerror(e) : "short read");
    }
    fclose(f);
    buf[n] = 0;
    *data = buf;
    if (n_bytes) *n_bytes = (size_t)n;
    return 0;
}

/* the directory a file named path goes in: "." for a bare name, "/" for one at the root */
void dt_parent_dir(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(dir, n, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else snprintf(dir, n, ".");
}

int dt_check_target(const char *path)
{
    struct stat st;
    char dir[4096];
    if (!*path) return dt_fail("an empty file name (expected a file to write)");
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return dt_fail("%s is %s (expected a regular file or no file: dtrain replaces it)", path,
                       dt_file_kind(st.st_mode));
    dt_parent_dir(path, dir, sizeof dir);
    if (stat(dir, &st) != 0) return dt_fail("%s: cannot create: no directory %s (%s)", path, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return dt_fail("%s: %s is %s, not a directory", path, dir, dt_file_kind(st.st_mode));
    if (access(dir, W_OK | X_OK) != 0) return dt_fail("%s: cannot write in %s (%s)", path, dir, strerror(errno));
    return 0;
}

int dt_target_misnamed(const char *path)
{
    struct stat st;
    char dir[4096];
    if (!*path) return 1;
    if (lstat(path, &st) != 0) {
        if (errno == ENAMETOOLONG) return 1; /* a name no file can have */
    } else if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        return 1;
    }
    if (dt_is_kind(path, 1)) return 1; /* a link to a directory */
    if (dt_kernel_fs(path)) return 1;  /* a kernel file */
    dt_parent_dir(path, dir, sizeof dir);
    return !dt_is_kind(dir, 1);
}

const char *dt_kernel_fs(const char *path)
{
    struct statfs fs;
    if (statfs(path, &fs) != 0) return NULL;
    switch ((unsigned long)fs.f_type) {
    case 0x9fa0UL: return "/proc"; /* PROC_SUPER_MAGIC */
    case 0x62656572UL: return "/sys"; /* SYSFS_MAGIC */
    case 0x27e0ebUL: /* CGROUP_SUPER_MAGIC */
    case 0x63677270UL: return "/sys/fs/cgroup"; /* CGROUP2_SUPER_MAGIC */
    case 0x64626720UL: return "/sys/kernel/debug"; /* DEBUGFS_MAGIC */
    default: return NULL;
    }
}

int dt_check_creatable(const char *path)
{
    if (dt_check_target(path) != 0) return -1;
    /* a file beside it, created and removed: where access() cannot tell (as root in /proc, say), the
     * write would fail only at the end of the run */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s.probe.%ld", path, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST)
        return dt_fail("%s: cannot create a file beside it (%s)", path, strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    return 0;
}

/* Temporary files being written: removed if a signal ends the process (dt_remove_temp_files). */
#define MAX_TEMP 8
static char *temp_files[MAX_TEMP];
static pthread_mutex_t temp_lock = PTHREAD_MUTEX_INITIALIZER;

void dt_temp_add(char *path)
{
    pthread_mutex_lock(&temp_lock);
    for (int i = 0; i < MAX_TEMP; i++)
        if (!temp_files[i]) {
            temp_files[i] = path;
            break;
        }
    pthread_mutex_unlock(&temp_lock);
}

void dt_temp_remove(const char *path)
{
    pthread_mutex_lock(&temp_lock);
    for (int i = 0; i < MAX_TEMP; i++)
        if (temp_files[i] == path) temp_files[i] = NULL;
    pthread_mutex_unlock(&temp_lock);
}

void dt_remove_temp_files(void)
{
    for (int i = 0; i < MAX_TEMP; i++) { /* async-signal-safe: no lock, unlink only */
        char *p = temp_files[i];
        if (p) unlink(p);
    }
}

static volatile sig_atomic_t stop_signal;

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGUSR1);
}

void dt_signals_block(void)
{
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* The one thread that takes the stop signals (sigwait): no thread that computes, loads or talks
 * is ever interrupted by one. */
static void *signal_thread(void *arg)
{
    sigset_t set;
    (void)arg;
    stop_set(&set);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) != 0) continue;
        if (stop_signal) { /* asked twice: go now, leaving nothing half-written */
            sigset_t one;
            dt_remove_temp_files();
            signal(sig, SIG_DFL);
            sigemptyset(&one);
            sigaddset(&one, sig);
            pthread_sigmask(SIG_UNBLOCK, &one, NULL);
            raise(sig);
            _exit(128 + sig); /* not reached: the default action ends the process */
        }
        stop_signal = sig;
    }
    return NULL;
}

void dt_signals_install(void)
{
    pthread_t t;
    pthread_attr_t a;
    dt_signals_block(); /* in this thread too, if main did not block them first */
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, signal_thread, NULL) != 0) { /* cannot happen at start-up; keep the defaults */
        sigset_t set;
        stop_set(&set);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    }
    pthread_attr_destroy(&a);
}

int dt_stop_signal(void) { return stop_signal; }

/* ---- outputs: written whole, held by one process, no temporary file left ---------------------- */

/* The outputs this process holds (dt_hold_output): each path and a descriptor of the file now at it,
 * locked (-1: no file there yet). flock's lock belongs to the open file, so it moves with the file a
 * commit renames into place and ends with the process, however it ends. */
#define MAX_HELD 4
static struct {
    char *path;
    int fd;
} held[MAX_HELD];

static int held_index(const char *path)
{
    for (int i = 0; i < MAX_HELD; i++)
        if (held[i].path && strcmp(held[i].path, path) == 0) return i;
    return -1;
}

static int refuse_held(const char *path)
{
    errno = EWOULDBLOCK;
    return dt_fail("%s: another run is writing this file (it holds a lock on it): give each run its own name, or "
                   "let that run end first",
                   path);
}

/* Locks the file at path, unless it is `mine` (the same file): 0 (*fd the locked descriptor, -1 if
 * there is no file, or it is mine), or -1 and a message when another process holds it */
static int lock_file_at(const char *path, int mine, int *fd)
{
    struct stat st, at, own;
    *fd = -1;
    for (int tries = 0; tries < 16; tries++) {
        int f = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (f < 0) return errno == ENOENT ? 0 : dt_fail("%s: cannot open (%s)", path, strerror(errno));
        if (mine >= 0 && fstat(f, &st) == 0 && fstat(mine, &own) == 0 && st.st_dev == own.st_dev &&
            st.st_ino == own.st_ino) {
            close(f);
            return 0;
        }
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            close(f);
            if (e == EWOULDBLOCK) return refuse_held(path);
            if (e == ENOLCK || e == EINVAL || e == EOPNOTSUPP) return 0; /* a file system without locks */
            return dt_fail("%s: cannot lock (%s)", path, strerror(e));
        }
        /* the file locked is still the one at path (not replaced meanwhile by its writer's next one) */
        if (fstat(f, &st) == 0 && stat(path, &at) == 0 && st.st_dev == at.st_dev && st.st_ino == at.st_ino) {
            *fd = f;
            return 0;
        }
        close(f);
    }
    return refuse_held(path);
}

int dt_hold_output(const char *path)
{
    int i = held_index(path), fd;
    if (i >= 0) return 0;
    for (i = 0; i < MAX_HELD && held[i].path;) i++;
    if (i == MAX_HELD) return dt_fail("internal: more than %d outputs held", MAX_HELD);
    if (lock_file_at(path, -1, &fd) != 0) return -1;
    if (!(held[i].path = dt_strdup(path))) {
        if (fd >= 0) close(fd);
        return -1;
    }
    held[i].fd = fd;
    return 0;
}

void dt_remove_stale_temps(const char *path, const char *mine)
{
    char dir[4096];
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path, *mine_base = mine + (base - path);
    size_t nb = strlen(base);
    dt_parent_dir(path, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *pid = e->d_name + nb + 5;
        if (strncmp(e->d_name, base, nb) != 0 || strncmp(e->d_name + nb, ".tmp.", 5) != 0 || !*pid ||
            strspn(pid, "0123456789") != strlen(pid))
            continue;
        char p[8192];
        struct stat st;
        if (strcmp(e->d_name, mine_base) == 0 || snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p)
            continue;
        int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) continue;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && time(NULL) - st.st_mtime > 60 &&
            flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlink(p);
        close(fd);
    }
    closedir(d);
}

int dt_atomic_open(dt_atomic *a, const char *path)
{
    size_t len = strlen(path) + 32;
    struct stat st;
    int fd;
    memset(a, 0, sizeof *a);
    if (dt_check_target(path) != 0) return -1;
    if (!(a->tmp = dt_malloc(len)) || !(a->path = dt_strdup(path))) {
        free(a->tmp);
        return -1;
    }
    snprintf(a->tmp, len, "%s.tmp.%ld", path, (long)getpid());
    fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 || !(a->f = fdopen(fd, "wb"))) {
        dt_fail("%s: cannot create its temporary file %s (%s)", path, a->tmp, strerror(errno));
        if (fd >= 0) close(fd);
        free(a->tmp);
        free(a->path);
        return -1;
    }
    dt_temp_add(a->tmp);
    flock(fd, LOCK_EX | LOCK_NB); /* ours alone: marks it as being written (dt_remove_stale_temps) */
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) fchmod(fd, st.st_mode & 07777); /* the mode it had */
    dt_remove_stale_temps(path, a->tmp);
    return 0;
}

int dt_sync_dir_of(const char *path)
{
    char dir[4096];
    dt_parent_dir(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    if (fd < 0) return 0; /* a directory one may write in but not read: the rename stands */
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        rc = dt_fail("%s: fsync of its directory %s failed (%s)", path, dir, strerror(errno));
    close(fd);
    return rc;
}

int dt_atomic_commit(dt_atomic *a, int ok)
{
    int rc = 0, h = ok ? held_index(a->path) : -1, lock = -1, keep = -1;
    if (ok && (fflush(a->f) != 0 || ferror(a->f))) rc = dt_fail("%s: write failed (%s)", a->tmp, strerror(errno));
    if (ok && rc == 0 && fsync(fileno(a->f)) != 0) rc = dt_fail("%s: fsync failed (%s)", a->tmp, strerror(errno));
    /* a held output: the file at its path is this process's (or none, or one no process holds) */
    if (h >= 0 && rc == 0 && lock_file_at(a->path, held[h].fd, &lock) != 0) rc = -1;
    if (h >= 0 && rc == 0 && (keep = dup(fileno(a->f))) < 0) rc = dt_fail("%s: %s", a->path, strerror(errno));
    if (fclose(a->f) != 0 && ok && rc == 0) rc = dt_fail("%s: close failed (%s)", a->tmp, strerror(errno));
    if (ok && rc == 0 && dt_check_target(a->path) != 0) rc = -1; /* replaced by a link or a device meanwhile */
    if (ok && rc == 0 && rename(a->tmp, a->path) != 0)
        rc = dt_fail("%s: cannot rename to %s (%s)", a->tmp, a->path, strerror(errno));
    if (!ok || rc != 0) unlink(a->tmp);
    if (ok && rc == 0) rc = dt_sync_dir_of(a->path);
    if (lock >= 0) close(lock);
    if (keep >= 0 && rc == 0) { /* the lock goes on with the file now at the path */
        if (held[h].fd >= 0) close(held[h].fd);
        held[h].fd = keep;
    } else if (keep >= 0) {
        close(keep);
    }
    dt_temp_remove(a->tmp);
    free(a->tmp);
    free(a->path);
    return ok ? rc : -1;
}

int dt_write_file_atomic(const char *path, const void *data, size_t n_bytes)
{
    dt_atomic a;
    if (dt_atomic_open(&a, path) != 0) return -1;
    int ok = fwrite(data, 1, n_bytes, a.f) == n_bytes;
    if (!ok) dt_fail("%s: write failed (%s)", path, strerror(errno));
    return ok ? dt_atomic_commit(&a, 1) : (dt_atomic_commit(&a, 0), -1);
}

uint64_t dt_hash64(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
