/* fuzz_cifar — CIFAR-10 and CIFAR-100 binary batches: the input is every file of both datasets
 * (one file, written once per input; the dataset's file names are links to it). */
#include <sys/stat.h>

#include "fuzz.h"
#include "data/data.h"

static void link_all(const char *dir)
{
    static const char *names[] = {"cifar-10-batches-bin/data_batch_1.bin", "cifar-10-batches-bin/data_batch_2.bin",
                                  "cifar-10-batches-bin/data_batch_3.bin", "cifar-10-batches-bin/data_batch_4.bin",
                                  "cifar-10-batches-bin/data_batch_5.bin", "cifar-10-batches-bin/test_batch.bin",
                                  "cifar-100-binary/train.bin", "cifar-100-binary/test.bin"};
    char path[256], target[256];
    snprintf(path, sizeof path, "%s/cifar-10-batches-bin", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/cifar-100-binary", dir);
    mkdir(path, 0700);
    snprintf(target, sizeof target, "%s/input.bin", dir);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (symlink(target, path) != 0) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static int linked;
    char path[256];
    if (!linked) {
        link_all(fuzz_tmpdir());
        linked = 1;
    }
    fuzz_write("input.bin", data, n, path, sizeof path);
    for (int hundred = 0; hundred <= 1; hundred++) {
        dt_dataset *ds = NULL;
        dt_err_clear();
        int rc = dataset_open(hundred ? "cifar100" : "cifar10", fuzz_tmpdir(), &ds);
        fuzz_expect_message(rc);
        if (rc == 0) dataset_close(ds);
    }
    return 0;
}
