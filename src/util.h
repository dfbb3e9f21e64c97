/* util — the small things every module needs: error status and message, clocks, aligned
 * memory, checked number parsing, file reading.
 *
 * Errors: a function that can fail returns int (0 = ok, -1 = failed) and, when it fails, leaves
 * a one-line message in a per-thread buffer (set with dt_fail, read with dt_errmsg), like errno.
 * The message says what went wrong, and where it can: "file:line: what (expected X, found Y)".
 * Only main decides to print and exit; library code never exits.
 */
#ifndef DT_UTIL_H
#define DT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#if defined(__GNUC__)
#define DT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DT_PRINTF(a, b)
#endif

/* Sets the thread's error message and returns -1, so `return dt_fail("...")` reads naturally. */
/* The length of the valid UTF-8 character at s (1 to 4), 0 at the terminator or an invalid byte. */
size_t dt_utf8_len(const char *s);
int dt_fail(const char *fmt, ...) DT_PRINTF(1, 2);
/* Prepends "prefix: " to the current message (adds context while the error travels up). */
int dt_fail_prefix(const char *fmt, ...) DT_PRINTF(1, 2);
const char *dt_errmsg(void);
void dt_err_clear(void);

/* Monotonic wall clock in seconds. */
double dt_now(void);
/* CPU seconds this process has used, all threads (CLOCK_PROCESS_CPUTIME_ID) */
double dt_cpu_process(void);

/* 64-byte aligned allocation (cache line, AVX-512); dt_free accepts NULL. Zeroed when asked. */
void *dt_alloc(size_t bytes);
void *dt_zalloc(size_t bytes);
void dt_free(void *p);
/* An allocator of host memory other than dt_zalloc: a GPU backend's page-locked memory for what
 * it copies, handed to code that cannot see backends (the data loader). alloc returns zeroed,
 * 64-byte aligned memory or NULL with a message. */
typedef struct dt_host_allocator {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void *ctx;
} dt_host_allocator;
/* Through a (NULL: dt_zalloc / dt_free). */
void *dt_host_alloc(const dt_host_allocator *a, size_t bytes);
void dt_host_free(const dt_host_allocator *a, void *p);
/* malloc/strdup that report out-of-memory through dt_fail and return NULL. */
void *dt_malloc(size_t bytes);
char *dt_strdup(const char *s);

/* Whether s is a decimal number as people write it: an optional sign and digits, and unless
 * integer, at most one point and an exponent; no blanks, hexadecimal, inf or nan, which strtod and
 * strtol would also take. */
int dt_is_decimal(const char *s, int integer);
/* The offset of the first byte of s[0..n) that is not part of valid UTF-8, n if all is. */
size_t dt_utf8_invalid(const char *s, size_t n);
/* A list of items separated by sep (which strtok_r would read) fails where it has an empty item:
 * itself empty, a leading or trailing sep, or two in a row, which strtok_r would silently skip. */
int dt_list_check(const char *list, char sep);
/* Checked parsing: the whole string must be a decimal number in [lo, hi] (or inf where hi is
 * infinite); the error names `what` and quotes the value as given. */
int dt_parse_long(const char *s, long lo, long hi, const char *what, long *out);
int dt_parse_double(const char *s, double lo, double hi, const char *what, double *out);

/* "a directory", "a symbolic link", "a pipe" ... for messages about a path that is not a regular file */
const char *dt_file_kind(mode_t m);
/* Whether path is a directory (dir) or a regular file, links followed: where a command line names
 * none, or one of the other kind, the command line is wrong (exit 2), not the file. */
int dt_is_kind(const char *path, int dir);
/* Reads a whole file into a NUL-terminated buffer (caller frees with free()). */
int dt_read_file(const char *path, char **data, size_t *n_bytes);
/* dt_read_file of a text file of at most max bytes: a larger one (what: "net file") is refused
 * before it is read */
int dt_read_text(const char *path, size_t max, const char *what, char **data, size_t *n_bytes);
/* fd, opened with O_NONBLOCK (so that a named pipe without its other end fails or is seen at once
 * instead of waiting in open()), as a FILE that blocks as a file does; on failure fd is closed, errno
 * kept, NULL */
FILE *dt_fdopen_blocking(int fd, const char *mode);
/* path opened for reading as fopen(path, "rb") would, but without waiting in open() for a named
 * pipe's writer: NULL with errno set where it cannot be opened, and NULL with *kind its st_mode where
 * it is not a regular file (*kind 0 otherwise) */
FILE *dt_fopen_regular(const char *path, mode_t *kind);
/* The host's memory: MemAvailable (what the kernel can give without swapping) and MemTotal. */
int dt_host_memory(size_t *avail, size_t *total);
/* A file dtrain is to write (and replace atomically): absent or a regular file (not a link, a
 * directory or a device), in a directory that exists and can be written. */
int dt_check_target(const char *path);
/* The directory of a file's path ("." for a bare name, "/" for one in the root) */
void dt_parent_dir(const char *path, char *dir, size_t n);
/* dt_check_target, and a file can be created beside PATH (tried: created and removed) */
int dt_check_creatable(const char *path);
/* Whether a file to write, path, is named wrongly on the command line: it is a directory or device,
 * or its directory is not there (exit 2), rather than one the run may not write (exit 1). */
int dt_target_misnamed(const char *path);
/* The kernel's file system PATH is on ("/proc", "/sys"; links followed), or NULL for any other (or
 * no file): no place for an output, whatever open() and access() say as root (exit 2) */
const char *dt_kernel_fs(const char *path);
/* Writes a file atomically: temp file beside it, fsync, rename. */
int dt_write_file_atomic(const char *path, const void *data, size_t n_bytes);
/* The same, streamed: dt_atomic_open gives a FILE* on a temp file beside `path`; dt_atomic_commit
 * flushes, fsyncs and renames it over `path` (or removes it if `ok` is 0). A crash in between
 * leaves the old file untouched. */
typedef struct dt_atomic {
    FILE *f;
    char *tmp, *path;
} dt_atomic;
int dt_atomic_open(dt_atomic *a, const char *path);
int dt_atomic_commit(dt_atomic *a, int ok);
/* The commits also sync the directory (the rename made durable), give the new file the mode of the
 * one it replaces, and remove temporary files of PATH that a killed process left. */
/* PATH is an output this process alone writes, maybe again and again (a checkpoint): the file at PATH
 * (if any) is locked now and every commit to PATH keeps the lock on the new file, so that a second
 * process holding it, or writing PATH while this one holds it, fails with a message (-1) instead of
 * replacing the other's files unseen. The lock ends with the process. */
int dt_hold_output(const char *path);
/* For writers of their own temporary files (path.tmp.PID, flocked from creation to rename): removes
 * those beside path that a killed process left (a minute old, no process holding their lock), but
 * `mine`; and, after the rename, syncs path's directory (the rename made durable): 0, or -1 and a
 * message */
void dt_remove_stale_temps(const char *path, const char *mine);
int dt_sync_dir_of(const char *path);

/* Temporary files being written (their path strings stay valid until removed from the list):
 * dt_remove_temp_files unlinks them, from a signal handler too. */
void dt_temp_add(char *path);
void dt_temp_remove(const char *path);
void dt_remove_temp_files(void);

/* SIGTERM, SIGINT and SIGUSR1 ask the run to stop: the first is recorded (dt_stop_signal) for the
 * train loop and long loops to act on at a safe point; a second removes the temporary files and
 * ends the process at once, by that signal. */
void dt_signals_install(void);
/* Blocks those signals in the calling thread and so in every thread it starts afterwards (main
 * calls it before Open MPI, OpenMP or the loader start theirs): they are taken by one thread of
 * their own that dt_signals_install starts, so no library thread is interrupted by them. */
void dt_signals_block(void);
int dt_stop_signal(void); /* the first stop signal received, 0 if none */

/* FNV-1a, for configuration fingerprints and RNG stream names. */
uint64_t dt_hash64(const void *data, size_t n, uint64_t h);
#define DT_HASH_INIT 0xcbf29ce484222325ULL
/* The seed of image packs' checksums and image trees' fingerprints: FNV's offset basis short of its last digit,
 * kept because the packs on disk carry hashes made with it. */
#define DT_HASH_PACK_SEED 1469598103934665603ULL

#define DT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
