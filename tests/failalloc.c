/* failalloc — a preloaded library for tests/faults.sh: posix_memalign of exactly DT_FAIL_BYTES bytes
 * fails (ENOMEM) the first time it is asked for, as it would under a memory limit, so that one rank's
 * allocation fails at a chosen place. Every other allocation goes to the C library's.
 *
 *     env LD_PRELOAD=tests/failalloc.so DT_FAIL_BYTES=4194304 dtrain ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

int posix_memalign(void **p, size_t align, size_t bytes)
{
    static int (*next)(void **, size_t, size_t);
    static int failed;
    if (!next) next = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    const char *want = getenv("DT_FAIL_BYTES");
    if (!failed && want && strtoull(want, NULL, 10) == bytes) {
        failed = 1;
        return ENOMEM;
    }
    return next(p, align, bytes);
}
