/* fuzz.h — what the libFuzzer harnesses share (tests/fuzz/fuzz_*.c, built and run by tools/fuzz).
 *
 * Each harness feeds one reader of untrusted input (a file dtrain opens, or its command line) with
 * the fuzzer's bytes. A reader must return 0 or -1 with a message; AddressSanitizer and
 * UndefinedBehaviorSanitizer turn any memory error, overflow or leak into a crash, and a failure
 * without a message is reported here as one too.
 */
#ifndef DT_FUZZ_H
#define DT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

/* A private directory for the files a harness writes (made once, removed at exit). */
static char fuzz_dir[64];

static void fuzz_cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: cannot remove %s\n", fuzz_dir);
}

static const char *fuzz_tmpdir(void)
{
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/dtrain-fuzz-XXXXXX");
        if (!mkdtemp(fuzz_dir)) abort();
        atexit(fuzz_cleanup);
    }
    return fuzz_dir;
}

/* Writes data[0..n) to DIR/name (the path in out) and returns out. */
static char *fuzz_write(const char *name, const uint8_t *data, size_t n, char *out, size_t out_n)
{
    snprintf(out, out_n, "%s/%s", fuzz_tmpdir(), name);
    FILE *f = fopen(out, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) abort();
    return out;
}

/* A malloc'd copy of data[0..n) in `room` bytes (room >= n; readers that take the whole file, or
 * text that needs a NUL after it). */
static void *fuzz_copy(const uint8_t *data, size_t n, size_t room)
{
    char *p = calloc(1, room ? room : 1);
    if (!p) abort();
    if (n) memcpy(p, data, n);
    return p;
}

/* Every failure must leave a message (call dt_err_clear before the reader). */
static void fuzz_expect_message(int rc)
{
    if (rc != 0 && strcmp(dt_errmsg(), "unknown error") == 0) {
        fprintf(stderr, "fuzz: the reader failed without a message\n");
        abort();
    }
    dt_err_clear();
}

#endif
