/* opt — how an option is declared. The CLI's table (cli.c) and the comm modes' own flags (each
 * mode file, and mode.c for flags several modes read) use this one type, so a mode declares its
 * flags, their ranges, defaults and help where it reads them, and the CLI parses, checks, lists
 * and documents them with the rest.
 */
#ifndef DT_OPT_H
#define DT_OPT_H

#include <stddef.h>

typedef enum { OPT_FLAG, OPT_INT, OPT_DOUBLE, OPT_STRING, OPT_CHOICE, OPT_ACTION } dt_opt_kind;

enum {
    OPT_LOCAL = 1,     /* not part of what the run computes: may differ between ranks and runs (paths, output) */
    OPT_NO_CONFIG = 2, /* command line only */
    OPT_AGREE = 4,     /* OPT_LOCAL, but it changes what ranks do together: all ranks must have the same value */
    OPT_AGREE_SET = 8, /* OPT_LOCAL, but whether it is given changes what ranks do together (--save) */
};

typedef struct dt_optdef {
    const char *group;
    const char *name;
    dt_opt_kind kind;
    const char *metavar;
    size_t offset; /* of the value in the struct the table is for: int (flag), long, double or char * */
    double lo, hi; /* range of numbers */
    const char *choices; /* OPT_CHOICE: "a|b|c" */
    const char *dflt;    /* default as text; NULL: none (a number is then -1, a string NULL: "not given") */
    int flags;
    int action; /* OPT_ACTION: what it asks for */
    const char *help;
    /* optional: checks a string value beyond its kind (a name in a table, a schedule's syntax);
     * the message names `origin` */
    int (*check)(const char *value, const char *origin);
} dt_optdef;

#endif
