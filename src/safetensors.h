/* safetensors — the file layout of weights and checkpoints, so they open in PyTorch and NumPy.
 *
 *   8 bytes   N, little-endian uint64: length of the header
 *   N bytes   JSON: {"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [..],
 *             "data_offsets": [begin, end]}, ...}, padded with spaces to a multiple of 8
 *   rest      raw little-endian tensor data; offsets are relative to its start
 *
 * Reading validates everything against the file's real size before any data is used.
 * Writing is atomic (temp file, fsync, rename). Tensors are written from host memory.
 */
#ifndef DT_SAFETENSORS_H
#define DT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

typedef struct st_entry {
    char *name;
    char dtype[8];
    int n_dims;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end; /* byte offsets into the data section */
} st_entry;

typedef struct st_file {
    int n;
    st_entry *e;
    int n_meta;
    char **meta_keys, **meta_vals;
    uint8_t *data; /* the data section */
    size_t data_bytes;
    void *raw; /* whole file */
} st_file;

int st_read(const char *path, st_file **out);
/* The same from a whole file already in memory (malloc'd; the st_file takes it, also on failure);
 * `path` names it in messages. Refuses headers over 100 MB, duplicate names, bytes out of bounds
 * or shared by two tensors. */
int st_parse(void *raw, size_t n, const char *path, st_file **out);
void st_close(st_file *f);
const st_entry *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key);
/* "[500, 784]" */
void st_shape_format(int n_dims, const int64_t *shape, char *buf, size_t n);

/* A tensor to write: F32 data in host memory, or I64 data when i64 is set (data then unused). */
typedef struct st_tensor {
    const char *name;
    int n_dims;
    int64_t shape[ST_MAX_DIMS];
    const float *data;
    const int64_t *i64;
} st_tensor;

/* meta: n_meta key/value pairs (strings). */
int st_write(const char *path, const st_tensor *t, int n, const char *const *meta_keys, const char *const *meta_vals,
             int n_meta);

/* A checksum (continuing h) of every tensor's name, shape and data, in order: of the tensors about
 * to be written, and of a file's as read. Equal for the same F32 tensors. */
uint64_t st_checksum_tensors(uint64_t h, const st_tensor *t, int n);
uint64_t st_checksum_file(uint64_t h, const st_file *f);

#endif
