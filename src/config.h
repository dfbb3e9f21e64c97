/* config — "key = value" files (dtrain.conf(5)): '#' comments, one setting per line.
 *
 * Reads the file and hands each setting to the caller's `apply` callback with an origin
 * ("FILE:LINE: key") for its messages; knows nothing of which keys exist or what they mean
 * (the CLI's option table does). Errors name file:line.
 */
#ifndef DT_CONFIG_H
#define DT_CONFIG_H

/* Applies one setting; returns 0, or -1 with a message (dt_fail) that stops the reading. */
typedef int (*config_apply_fn)(void *arg, const char *key, const char *value, const char *origin);

/* Reads PATH and applies its settings in file order. 0, or -1 with a message. A key set twice and
 * a NUL byte are errors. */
int config_load(const char *path, config_apply_fn apply, void *arg);
/* The same on text[0..n) in memory (NUL-terminated at n; modified); path names it in messages.
 * comments 0: no '#' starts a comment (a run record's options, values as they were). */
int config_parse(char *text, size_t n, const char *path, int comments, config_apply_fn apply, void *arg);

#endif
