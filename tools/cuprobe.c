// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* cuprobe: the command-line front end. Subcommands live in their own files. */
#include <stdio.h>
#include <string.h>

#include "exporter.h"
#include "probes.h"
#include "run.h"
#include "stats.h"
#include "trace.h"

#ifndef CUPROBE_VERSION
#define CUPROBE_VERSION "0.1.0"
#endif

static const char usage[] =
"usage: cuprobe COMMAND [OPTIONS]\n"
"\n"
"Kernel-assisted tracing of CUDA programs: kernel uprobes on libcuda.so.1\n"
"feed BPF maps and a ring buffer; nothing is injected into the programs\n"
"(but device programs, which cuprobe run puts into the kernels of a COMMAND).\n"
"Needs root (CAP_BPF, CAP_PERFMON) and a kernel with BTF.\n"
"\n"
"Commands:\n"
"  trace     stream launches, allocations, copies, syncs and process events\n"
"  stats     count in BPF maps: kernels, API calls and latency, memory, leaks\n"
"  top       live view of every CUDA process on the host\n"
"  run       run your own BPF programs on CUDA calls (and in kernels, with -- COMMAND)\n"
"  exporter  serve per-process, per-GPU metrics to Prometheus (a node agent)\n"
"  probes    the probe catalogue; what a libcuda exports that is not probed\n"
"\n"
"  cuprobe COMMAND --help   options of one command\n"
"  cuprobe --version        version\n";

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("cuprobe %s\n", CUPROBE_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "trace"))
		return cp_cmd_trace(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stats"))
		return cp_cmd_stats(argc - 1, argv + 1);
	if (!strcmp(argv[1], "top"))
		return cp_cmd_top(argc - 1, argv + 1);
	if (!strcmp(argv[1], "run"))
		return cp_cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "exporter"))
		return cp_cmd_exporter(argc - 1, argv + 1);
	if (!strcmp(argv[1], "probes"))
		return cp_cmd_probes(argc - 1, argv + 1);
	fprintf(stderr, "cuprobe: unknown command '%s' (see cuprobe --help)\n", argv[1]);
	return 2;
}
