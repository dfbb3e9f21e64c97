/* fuzz_cli — the command line: the input is argv[1..], NUL- or newline-separated (at most 32). */
#include "fuzz.h"
#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = fuzz_copy(data, n, n + 1), *argv[34] = {"dtrain"};
    int argc = 1;
    text[n] = 0;
    for (char *p = text; p <= text + n && argc < 33;) {
        size_t len = strcspn(p, "\n");
        p[len] = 0;
        argv[argc++] = p;
        p += len + 1;
    }
    argv[argc] = NULL;
    dt_opts o;
    memset(&o, 0, sizeof o);
    dt_err_clear();
    fuzz_expect_message(cli_parse(argc, argv, &o));
    char *canon = cli_canonical(&o), *agree = cli_agreement(&o);
    free(canon), free(agree);
    cli_free(&o);
    free(text);
    return 0;
}
