/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef CUPROBE_PROBES_H
#define CUPROBE_PROBES_H

/* `cuprobe probes ...`: argv[0] is "probes". Returns the process exit status. */
int cp_cmd_probes(int argc, char **argv);

#endif
