/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef CUPROBE_STATS_H
#define CUPROBE_STATS_H

/* `cuprobe stats ...` and `cuprobe top ...`: argv[0] is the command name. */
int cp_cmd_stats(int argc, char **argv);
int cp_cmd_top(int argc, char **argv);

#endif
