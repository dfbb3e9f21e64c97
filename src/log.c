#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "util.h"

#define MAX_FIELDS 48

struct dt_log {
    int enabled;
    FILE *json;
    char *json_path;
    dt_progress progress;
    int log_every;
    double last_draw;
    int bar_drawn; /* a bar line is on screen without its newline */
    int n_fields;
    char *keys[MAX_FIELDS], *vals[MAX_FIELDS];
    int is_num[MAX_FIELDS];
    int keep;           /* --resume onto an existing log file: opened without truncating it (log_resume) */
    int emptied;        /* a regular file's earlier records are gone (log_start empties it: not before) */
    int regular;        /* a regular file (locked, emptied at the start, synced at the summary) */
    double time_offset; /* added to each record's time: the last kept record's */
};

dt_progress log_progress_auto(int launched)
{
    /* Under mpirun every rank's stdout is a pty that Open MPI forwards, whatever mpirun's own
     * stdout is; so ask where the launcher's stdout goes (the launcher is our parent on the
     * host where rank 0 usually runs). */
    if (launched) {
        char path[64], target[256];
        ssize_t n;
        snprintf(path, sizeof path, "/proc/%ld/fd/1", (long)getppid());
        n = readlink(path, target, sizeof target - 1);
        if (n <= 0) return PROGRESS_LINES;
        target[n] = 0;
        return strncmp(target, "/dev/pts/", 9) == 0 || strncmp(target, "/dev/tty", 8) == 0 ? PROGRESS_BAR
                                                                                            : PROGRESS_LINES;
    }
    return isatty(STDOUT_FILENO) ? PROGRESS_BAR : PROGRESS_LINES;
}

/* A named pipe is opened without blocking, so that one nobody reads fails (ENXIO) instead of waiting
 * in open() for a reader, forever and past a SIGTERM; once open, it blocks as a file does. A regular
 * file is locked (flock, so that a second run onto it fails instead of interleaving two runs' records
 * with holes) and not truncated here: a run that fails in its set-up leaves an earlier log as it was
 * (log_start empties it). EWOULDBLOCK: another process holds it. */
static FILE *open_log(const char *path, int *keep, int *regular)
{
    struct stat st;
    *regular = 0;
    if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode)) {
        *keep = 0;
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        return fd < 0 ? NULL : dt_fdopen_blocking(fd, "w");
    }
    if (*keep && !(stat(path, &st) == 0 && S_ISREG(st.st_mode))) *keep = 0;
    if (strncmp(path, "/dev/", 5) == 0 || strncmp(path, "/proc/", 6) == 0) /* /dev/stdout: stdout's own file */
        return fopen(path, *keep ? "r+" : "w");
    int fd = open(path, (*keep ? O_RDWR : O_WRONLY) | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        *regular = 1;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno; /* EWOULDBLOCK: another process holds it */
            close(fd);
            errno = e;
            return NULL;
        }
    }
    FILE *f = fdopen(fd, *keep ? "r+" : "w");
    if (!f) close(fd);
    return f;
}

int log_open(dt_log **out, int enabled, const char *json_path, const char *progress, int log_every, int launched,
             int keep)
{
    dt_log *l = calloc(1, sizeof *l);
    if (!l) return dt_fail("out of memory");
    l->enabled = enabled;
    l->log_every = log_every > 0 ? log_every : 50;
    l->last_draw = -1.0;
    if (!progress || strcmp(progress, "auto") == 0) l->progress = log_progress_auto(launched);
    else if (strcmp(progress, "bar") == 0) l->progress = PROGRESS_BAR;
    else if (strcmp(progress, "lines") == 0) l->progress = PROGRESS_LINES;
    else l->progress = PROGRESS_NONE;
    if (enabled && json_path) {
        /* appended to as it goes (not replaced atomically): a device or a pipe (/dev/stdout) is fine */
        l->keep = keep;
        if (!(l->json_path = dt_strdup(json_path)) || !(l->json = open_log(json_path, &l->keep, &l->regular))) {
            if (l->json_path && errno == ENXIO)
                dt_fail("--log %s: a named pipe that no process reads (expected one reading it, a file or a device)",
                        json_path);
            else if (l->json_path && errno == EWOULDBLOCK)
                dt_fail("--log %s: another run is writing this log (expected a log of this run's own, or that run "
                        "ended)", json_path);
            else if (l->json_path) dt_fail("--log %s: cannot create (%s)", json_path, strerror(errno));
            free(l->json_path);
            free(l);
            return -1;
        }
    }
    *out = l;
    return 0;
}

int log_enabled(const dt_log *l) { return l && l->enabled; }

static void end_bar(dt_log *l)
{
    if (l->bar_drawn) {
        fputc('\n', stdout);
        l->bar_drawn = 0;
    }
}

void log_text(dt_log *l, const char *fmt, ...)
{
    va_list ap;
    if (!l->enabled) return;
    end_bar(l);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void fmt_rate(char *buf, size_t n, double r)
{
    if (r >= 1e6) snprintf(buf, n, "%.2fM", r / 1e6);
    else if (r >= 1e4) snprintf(buf, n, "%.1fk", r / 1e3);
    else snprintf(buf, n, "%.0f", r);
}

static void fmt_dur(char *buf, size_t n, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

void log_tick(dt_log *l, const dt_record *r)
{
    if (!l->enabled || l->progress != PROGRESS_BAR) return;
    double now = dt_now();
    int last = r->iter_in_epoch == r->iters_per_epoch;
    if (!last && l->last_draw >= 0 && now - l->last_draw < 0.1) return;
    l->last_draw = now;
    double frac = r->iters_per_epoch ? (double)r->iter_in_epoch / (double)r->iters_per_epoch : 1.0;
    char bar[32], rate[32], eta[32];
    int w = 24, filled = (int)(frac * w);
    for (int i = 0; i < w; i++) bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
    bar[w] = 0;
    fmt_rate(rate, sizeof rate, r->samples_per_s);
    double left = r->samples_per_s > 0 && frac > 0 ? r->train_time / frac * (1.0 - frac) : 0.0;
    fmt_dur(eta, sizeof eta, left);
    printf("\r\033[Kepoch %d/%d [%s] %3.0f%%  it %ld/%ld  loss %.4f  acc %.3f  %s samples/s  eta %s", r->epoch,
           r->epochs, bar, 100.0 * frac, r->iter_in_epoch, r->iters_per_epoch, r->loss, r->train_acc, rate, eta);
    fflush(stdout);
    l->bar_drawn = 1;
}

static void json_times(FILE *f, const dt_record *r)
{
    double n = r->n_iters > 0 ? (double)r->n_iters : 1.0;
    for (int i = 0; i < DT_TIMES_N_PHASES; i++)
        fprintf(f, ",\"t_%s\":%.6g", dt_phase_names[i], times_phase(&r->t, i) / n);
    fprintf(f, ",\"t_iter\":%.6g,\"overlapped\":%s", r->t.iter / n, r->overlapped ? "true" : "false");
    if (r->t_model > 0) fprintf(f, ",\"t_model\":%.6g", r->t_model);
    fprintf(f, ",\"cpu_iter\":%.6g", r->t.cpu / n);
    fprintf(f, ",\"cpu_comm\":%.6g", r->t.cpu_comm / n);
    if (r->t.density > 0) fprintf(f, ",\"density\":%.6g", r->t.density / n);
    if (r->may_skip || r->t.skipped > 0) /* a count, not per iteration */
        fprintf(f, ",\"skipped_steps\":%.0f", r->t.skipped);
    if (r->loss_scale > 0) fprintf(f, ",\"loss_scale\":%.9g", r->loss_scale);
    fprintf(f, ",\"bytes_sent\":%.0f,\"bytes_recv\":%.0f", r->t.bytes_sent / n, r->t.bytes_recv / n);
    if (r->may_early || r->t.early > 0) fprintf(f, ",\"bytes_early\":%.0f", r->t.early / n);
}

/* ,"key":v with %.6g, or null where v is not finite */
static void json_number(FILE *f, const char *key, double v)
{
    if (isfinite(v)) fprintf(f, ",\"%s\":%.6g", key, v);
    else fprintf(f, ",\"%s\":null", key);
}

static void json_fields(dt_log *l, FILE *f)
{
    for (int i = 0; i < l->n_fields; i++) {
        fputc(',', f);
        json_write_string(f, l->keys[i]);
        fputc(':', f);
        if (l->is_num[i]) fputs(l->vals[i], f);
        else json_write_string(f, l->vals[i]);
    }
}

/* whether a line of the log stays when a run resumes at iteration it0: its start records, and what
 * came before it0 except what a run's end made: a summary, the record of a partial epoch, and when
 * the run goes on (goes_on), a log window that the end closed early (the resumed run's window goes
 * on with its sums); a line cut off by a crash goes */
static int line_stays(const char *line, size_t len, const dt_log *l, long it0, long ipe, int goes_on, double *time)
{
    json *j = NULL;
    int keep = 0;
    if (json_parse(line, len, "log line", &j) == 0 && j->type == JSON_OBJ) {
        const json *t = json_get(j, "type"), *it = json_get(j, "iter"), *tm = json_get(j, "time");
        const char *type = t && t->type == JSON_STR ? t->str : "";
        double at = it && it->type == JSON_NUM ? it->num : -1.0;
        int window_end = fmod(at, (double)l->log_every) == 0 || fmod(at, (double)ipe) == 0;
        keep = !strcmp(type, "start");
        if (!keep && at >= 0 && at <= (double)it0 && strcmp(type, "summary") != 0 &&
            (strcmp(type, "epoch") != 0 || fmod(at, (double)ipe) == 0) &&
            (strcmp(type, "iter") != 0 || window_end || at < (double)it0 || !goes_on)) {
            keep = 1;
            if (tm && tm->type == JSON_NUM && tm->num > *time) *time = tm->num;
        }
    }
    json_free(j);
    return keep;
}

int log_resume(dt_log *l, long it0, long ipe, int goes_on)
{
    if (!l->json || !l->keep) return 0;
    char *text = NULL;
    size_t len = 0;
    if (dt_read_file(l->json_path, &text, &len) != 0) return dt_fail_prefix("--log %s", l->json_path);
    size_t out = 0;
    for (size_t at = 0; at < len;) {
        size_t n = strcspn(text + at, "\n");
        int whole = at + n < len; /* ends in a newline: not cut off */
        if (whole && line_stays(text + at, n, l, it0, ipe, goes_on, &l->time_offset)) {
            memmove(text + out, text + at, n + 1);
            out += n + 1;
        }
        at += n + 1;
    }
    int rc = 0;
    if (fseek(l->json, 0, SEEK_SET) != 0 || fwrite(text, 1, out, l->json) != out || fflush(l->json) != 0 ||
        ftruncate(fileno(l->json), (off_t)out) != 0 || fseek(l->json, 0, SEEK_END) != 0)
        rc = dt_fail("--log %s: write failed (%s)", l->json_path, strerror(errno));
    free(text);
    return rc;
}

int log_start(dt_log *l)
{
    if (!l->json) return 0;
    if (l->regular && !l->keep && !l->emptied) { /* the set-up went through: the earlier records go now */
        if (ftruncate(fileno(l->json), 0) != 0 || fseek(l->json, 0, SEEK_SET) != 0)
            return dt_fail("--log %s: cannot empty it (%s)", l->json_path, strerror(errno));
        l->emptied = 1;
    }
    fputs("{\"type\":\"start\"", l->json);
    json_fields(l, l->json);
    fputs("}\n", l->json);
    if (fflush(l->json) != 0 || ferror(l->json))
        return dt_fail("--log %s: write failed (%s)", l->json_path, strerror(errno));
    return 0;
}

static int write_json(dt_log *l, const dt_record *r)
{
    FILE *f = l->json;
    fprintf(f, "{\"type\":\"%s\",\"epoch\":%d,\"iter\":%ld,\"time\":%.4f", r->type, r->epoch, r->iter,
            r->time + l->time_offset);
    /* -1: no such value; one that is not finite (weights --allow-nonfinite let in) is JSON's null */
    if (!(r->loss < 0)) json_number(f, "loss", r->loss);
    if (r->train_acc >= 0) fprintf(f, ",\"train_acc\":%.6g", r->train_acc);
    if (!(r->test_loss < 0)) json_number(f, "test_loss", r->test_loss);
    if (r->test_acc >= 0) fprintf(f, ",\"test_acc\":%.6g", r->test_acc);
    fprintf(f, ",\"lr\":%.6g,\"samples_per_s\":%.6g", r->lr, r->samples_per_s);
    if (strcmp(r->type, "iter") != 0)
        fprintf(f, ",\"train_time\":%.4f,\"eval_time\":%.4f", r->train_time, r->eval_time);
    json_times(f, r);
    if (strcmp(r->type, "summary") == 0) json_fields(l, f);
    fputs("}\n", f);
    if (fflush(f) != 0 || ferror(f))
        return dt_fail("--log %s: write failed (%s); stopping rather than losing the record", l->json_path,
                       strerror(errno));
    /* the summary on the disk: write-back errors (NFS's, a failing disk) surface here, not after exit 0 */
    if (l->regular && strcmp(r->type, "summary") == 0 && fsync(fileno(f)) != 0)
        return dt_fail("--log %s: fsync failed (%s)", l->json_path, strerror(errno));
    return 0;
}

static void print_summary(const dt_record *r)
{
    double n = r->n_iters > 0 ? (double)r->n_iters : 1.0, wall = r->t.iter / n;
    double crit = times_critical(&r->t, r->overlapped) / n;
    printf("\ntime per iteration (rank 0, mean of %ld iterations):\n", r->n_iters);
    printf("  %-10s %10s %7s\n", "phase", "ms", "share");
    for (int i = 0; i < DT_TIMES_N_PHASES; i++) {
        const char *name = dt_phase_names[i];
        double v = times_phase(&r->t, i) / n;
        if (v == 0.0) continue;
        if (r->overlapped && (!strcmp(name, "encode") || !strcmp(name, "comm") || !strcmp(name, "decode"))) continue;
        printf("  %-10s %10.3f %6.1f%%\n", name, 1e3 * v, wall > 0 ? 100.0 * v / wall : 0.0);
    }
    if (wall - crit > 1e-6)
        printf("  %-10s %10.3f %6.1f%%\n", "other", 1e3 * (wall - crit), 100.0 * (wall - crit) / wall);
    printf("  %-10s %10.3f %6.1f%%\n", "total", 1e3 * wall, 100.0);
    if (r->overlapped)
        printf("  on the communication thread, overlapped: encode %.3f ms, comm %.3f ms, decode %.3f ms\n",
               1e3 * r->t.encode / n, 1e3 * r->t.comm / n, 1e3 * r->t.decode / n);
    if (r->t.bytes_sent > 0)
        printf("  sent %.3f MB and received %.3f MB per iteration\n", r->t.bytes_sent / n / 1e6,
               r->t.bytes_recv / n / 1e6);
    if (r->t_model > 0)
        printf("  timing model: %.3f ms per iteration predicted, %.3f ms measured (%+.0f%%)\n", 1e3 * r->t_model,
               1e3 * wall, wall > 0 ? 100.0 * (r->t_model - wall) / wall : 0.0);
    char a[32], b[32];
    fmt_dur(a, sizeof a, r->train_time);
    fmt_dur(b, sizeof b, r->time);
    printf("training %s (%.1f s), %.0f samples/s; evaluation %.1f s; wall clock %s\n", a, r->train_time,
           r->samples_per_s, r->eval_time, b);
    if (r->test_acc >= 0) printf("final test accuracy %.4f, test loss %.4f\n", r->test_acc, r->test_loss);
}

int log_record(dt_log *l, const dt_record *r)
{
    if (!l->enabled) return 0;
    if (l->json && write_json(l, r) != 0) return -1;
    if (strcmp(r->type, "iter") == 0) {
        if (l->progress == PROGRESS_LINES) {
            char rate[32];
            fmt_rate(rate, sizeof rate, r->samples_per_s);
            printf("epoch %d/%d  it %ld/%ld (%3.0f%%)  loss %.4f  train_acc %.4f  lr %.4g  %s samples/s\n", r->epoch,
                   r->epochs, r->iter_in_epoch, r->iters_per_epoch,
                   100.0 * (double)r->iter_in_epoch / (double)(r->iters_per_epoch ? r->iters_per_epoch : 1), r->loss,
                   r->train_acc, r->lr, rate);
            fflush(stdout);
        }
        return 0;
    }
    end_bar(l);
    if (strcmp(r->type, "epoch") == 0) {
        char test[64] = "";
        if (r->test_acc >= 0) snprintf(test, sizeof test, "  test_loss %.4f  test_acc %.4f", r->test_loss, r->test_acc);
        char amp[96] = "";
        if (r->loss_scale > 0)
            snprintf(amp, sizeof amp, ", loss scale %g, %.0f step%s skipped", r->loss_scale, r->t.skipped,
                     r->t.skipped == 1 ? "" : "s");
        if (r->loss >= 0)
            printf("epoch %d/%d  train_loss %.4f  train_acc %.4f%s  (%.1f s, %.0f samples/s%s)\n", r->epoch, r->epochs,
                   r->loss, r->train_acc, test, r->train_time, r->samples_per_s, amp);
        else if (r->test_acc >= 0)
            printf("evaluation  test_loss %.4f  test_acc %.4f\n", r->test_loss, r->test_acc);
    } else if (r->n_iters > 0) {
        print_summary(r);
    } else if (r->test_acc >= 0) {
        printf("test accuracy %.4f, test loss %.4f\n", r->test_acc, r->test_loss);
    }
    fflush(stdout);
    return 0;
}

void log_summary_field(dt_log *l, const char *key, const char *value, int is_number)
{
    if (l->n_fields == MAX_FIELDS) return;
    l->keys[l->n_fields] = dt_strdup(key);
    l->vals[l->n_fields] = dt_strdup(value);
    l->is_num[l->n_fields] = is_number;
    l->n_fields++;
}

void log_close(dt_log *l)
{
    if (!l) return;
    if (l->enabled) end_bar(l);
    if (l->json) fclose(l->json);
    free(l->json_path);
    for (int i = 0; i < l->n_fields; i++) {
        free(l->keys[i]);
        free(l->vals[i]);
    }
    free(l);
}
