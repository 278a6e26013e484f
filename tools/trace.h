/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef CUPROBE_TRACE_H
#define CUPROBE_TRACE_H

/* `cuprobe trace ...`: argv[0] is "trace". Returns the process exit status. */
int cp_cmd_trace(int argc, char **argv);

#endif
