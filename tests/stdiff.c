/* stdiff A B [ATOL RTOL] — compares two safetensors files tensor by tensor (same names, shapes,
 * dtypes; F32 within the tolerance, other dtypes (batch-norm counters) exactly). Prints the worst element; exit 0 if
 * every element satisfies |a-b| <= atol + rtol*|b|, 1 if not, 2 if the files cannot be compared. ATOL = RTOL = 0 asks
 * for bit-identical files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "util.h"

int main(int argc, char **argv)
{
    st_file *a, *b;
    double atol = 0, rtol = 0, worst = 0, wa = 0, wb = 0, max_abs = 0;
    const char *wname = "";
    size_t wi = 0, n_total = 0;
    int bad = 0;
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: stdiff A.safetensors B.safetensors [ATOL RTOL]\n");
        return 2;
    }
    if (argc == 5) {
        atol = atof(argv[3]);
        rtol = atof(argv[4]);
    }
    if (st_read(argv[1], &a) != 0 || st_read(argv[2], &b) != 0) {
        fprintf(stderr, "stdiff: %s\n", dt_errmsg());
        return 2;
    }
    if (a->n != b->n) {
        fprintf(stderr, "stdiff: %d tensors vs %d\n", a->n, b->n);
        return 2;
    }
    for (int i = 0; i < a->n; i++) {
        const st_entry *ea = &a->e[i], *eb = st_find(b, ea->name);
        if (!eb || eb->end - eb->begin != ea->end - ea->begin || strcmp(ea->dtype, eb->dtype)) {
            fprintf(stderr, "stdiff: tensor %s missing or different in %s\n", ea->name, argv[2]);
            return 2;
        }
        if (strcmp(ea->dtype, "F32")) { /* counters (I64): equal or not */
            if (memcmp(a->data + ea->begin, b->data + eb->begin, (size_t)(ea->end - ea->begin)) != 0) {
                fprintf(stderr, "stdiff: %s tensor %s differs\n", ea->dtype, ea->name);
                bad = 1;
            }
            continue;
        }
        const float *x = (const float *)(a->data + ea->begin), *y = (const float *)(b->data + eb->begin);
        size_t n = (ea->end - ea->begin) / 4;
        for (size_t k = 0; k < n; k++) {
            double d = fabs((double)x[k] - (double)y[k]), lim = atol + rtol * fabs((double)y[k]);
            double score = lim > 0 ? d / lim : (d > 0 ? INFINITY : 0);
            if (d > max_abs) max_abs = d;
            if (score > worst || (worst == 0 && d > 0)) worst = score, wa = x[k], wb = y[k], wname = ea->name, wi = k;
            bad |= !(d <= lim) && !(atol == 0 && rtol == 0 && x[k] == y[k]);
        }
        n_total += n;
    }
    printf("stdiff: %zu values, max |diff| %.3g; worst %s[%zu]: %.9g vs %.9g (atol %g, rtol %g): %s\n", n_total,
           max_abs, wname, wi, wa, wb, atol, rtol, bad ? "DIFFERENT" : "ok");
    st_close(a);
    st_close(b);
    return bad ? 1 : 0;
}
