// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* cuprobe-man: writes the man page cuprobe(8), made from the option table, to stdout (build time). */
#include <stdio.h>

#include "cli_options.h"

int main(void)
{
	if (cp_usage__man(stdout, CUPROBE_VERSION) || fflush(stdout)) {
		perror("cuprobe-man");
		return 1;
	}
	return 0;
}
