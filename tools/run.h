/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef CUPROBE_RUN_H
#define CUPROBE_RUN_H

/* `cuprobe run PROG ...`: argv[0] is "run". Returns the process exit status. */
int cp_cmd_run(int argc, char **argv);

#endif
