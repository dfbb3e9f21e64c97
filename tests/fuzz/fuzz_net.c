/* fuzz_net — net description files (dtrain-net(5)): net_parse, which parses and infers shapes. */
#include "fuzz.h"
#include "engine/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = fuzz_copy(data, n, n + 1);
    text[n] = 0;
    dt_net *net = NULL;
    dt_err_clear();
    int rc = net_parse(text, "fuzz.net", "fuzz", &net);
    fuzz_expect_message(rc);
    if (rc == 0) net_destroy(net);
    free(text);
    return 0;
}
