/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef CUPROBE_EXPORTER_H
#define CUPROBE_EXPORTER_H

/* `cuprobe exporter ...`: argv[0] is "exporter". Returns the process exit status. */
int cp_cmd_exporter(int argc, char **argv);

#endif
