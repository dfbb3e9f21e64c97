/* cli — the one option table: getopt_long parsing, config files, --help, and the canonical
 * text of the options all ranks must agree on.
 *
 * Every flag lives in one table: cli.c's, with the flags the comm modes declare in their own
 * files (mode.h) after --mode. Parsing the command line, reading `--config` files (same names
 * without dashes, the command line wins), printing --help and checking man/dtrain.1
 * (tests/man_options.sh reads --help) all come from that table, so they cannot drift apart.
 * Parsing is pure: no MPI, no files other than the config file.
 */
#ifndef DT_CLI_H
#define DT_CLI_H

#include <stdio.h>

#include "options.h"

/* Parses argv (and the --config file it names) into o, starting from the defaults.
 * Returns 0, or -1 with a one-line message (dt_errmsg). */
int cli_parse(int argc, char **argv, dt_opts *o);
void cli_free(dt_opts *o);
void cli_help(FILE *f);
/* 1 if option NAME was set on the command line or in a config file (not left at its default). */
int cli_given(const dt_opts *o, const char *name);
/* Applies one option by long name; `origin` prefixes messages ("--lr", "x.conf:3: lr"). */
int cli_apply(dt_opts *o, const char *name, const char *value, const char *origin, int from_config);
/* "key = value\n" for every option that changes the computation, in table order (malloc'd): what
 * identifies a run (a checkpoint keeps it). */
char *cli_canonical(const dt_opts *o);
/* The same, and the options that change what ranks do together although they do not change the
 * result (--log-every, whether --save is given, ...): what every rank must agree on at start-up. */
char *cli_agreement(const dt_opts *o);
/* The lines of cli_canonical for the options that were given (command line, config or --rerun):
 * what --rerun applies. */
char *cli_given_text(const dt_opts *o);
/* Where the message of the last failure names an option that a config file (or --rerun's record)
 * set, and does not say so, adds where: "... (--staleness from x.conf:2)". */
void cli_explain(void);


#endif
