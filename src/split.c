#include "split.h"

void split_range(size_t n, int r, int p, size_t *first, size_t *count)
{
    size_t a = n * (size_t)r / (size_t)p, b = n * (size_t)(r + 1) / (size_t)p;
    *first = a;
    *count = b - a;
}
