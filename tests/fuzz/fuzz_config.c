/* fuzz_config — configuration files (dtrain.conf(5)) through the command line: --config FILE. */
#include "fuzz.h"
#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char path[256];
    fuzz_write("x.conf", data, n, path, sizeof path);
    char *argv[] = {"dtrain", "--config", path, NULL};
    dt_opts o;
    memset(&o, 0, sizeof o);
    dt_err_clear();
    fuzz_expect_message(cli_parse(3, argv, &o));
    cli_free(&o);
    return 0;
}
