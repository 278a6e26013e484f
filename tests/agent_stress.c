// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The lifecycle scenarios as a standalone program, for the ThreadSanitizer
 * build (Criterion cannot run under TSan: its arena setup fails). Prints a
 * line per scenario; exits 1 when any fails.
 */
#include <stdio.h>
#include <stdlib.h>

#include "lifecycle_scenarios.h"

int main(int argc, char **argv)
{
	int cycles = argc > 1 ? atoi(argv[1]) : 1000;
	char why[512] = "";
	int failed = 0;

	if (cycles < 1) {
		fprintf(stderr, "usage: agent_stress [CYCLES]\n");
		return 2;
	}
	if (lifecycle_setup(why, sizeof(why))) {
		fprintf(stderr, "agent_stress: %s\n", why);
		return 1;
	}
#define RUN(name, call) do { \
		int rc_ = (call); \
		printf("agent_stress: %-28s %s%s\n", name, rc_ ? "FAIL: " : "ok", rc_ ? why : ""); \
		failed |= rc_ != 0; \
	} while (0)
	RUN("start_stop_cycles", scenario_start_stop_cycles(cycles, why, sizeof(why)));
	RUN("stop_from_signal_handler", scenario_stop_from_signal_handler(why, sizeof(why)));
	RUN("stop_from_callback", scenario_stop_from_callback(why, sizeof(why)));
	RUN("tiny_ring_accounting", scenario_tiny_ring_accounting(why, sizeof(why)));
	/* No fork scenario: TSan does not support threads in a child of a threaded process. */
	return failed;
}
