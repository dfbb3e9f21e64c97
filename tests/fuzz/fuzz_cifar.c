/* fuzz_cifar — CIFAR-10 and CIFAR-100 binary batches: the input is every file of the dataset. */
#include <sys/stat.h>

#include "fuzz.h"
#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static const char *ten[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    char name[128], path[256], dir[128];
    snprintf(dir, sizeof dir, "%s/cifar-10-batches-bin", fuzz_tmpdir());
    mkdir(dir, 0700);
    for (size_t i = 0; i < sizeof ten / sizeof *ten; i++) {
        snprintf(name, sizeof name, "cifar-10-batches-bin/%s", ten[i]);
        fuzz_write(name, data, n, path, sizeof path);
    }
    snprintf(dir, sizeof dir, "%s/cifar-100-binary", fuzz_tmpdir());
    mkdir(dir, 0700);
    fuzz_write("cifar-100-binary/train.bin", data, n, path, sizeof path);
    fuzz_write("cifar-100-binary/test.bin", data, n, path, sizeof path);
    for (int hundred = 0; hundred <= 1; hundred++) {
        dt_dataset *ds = NULL;
        dt_err_clear();
        int rc = dataset_open(hundred ? "cifar100" : "cifar10", fuzz_tmpdir(), &ds);
        fuzz_expect_message(rc);
        if (rc == 0) dataset_close(ds);
    }
    return 0;
}
