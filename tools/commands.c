// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe's commands, one row each: name, function, summary, synopsis,
 * description, what it says at the end, its operands. cuprobe.c dispatches
 * through it; usage.c makes `cuprobe --help`, each command's --help and
 * the man pages from it and the option table (cli_options.c), which says
 * which options each command takes; completion.c makes the bash completion
 * from the same two.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli_options.h"
#include "commands.h"
#include "session.h"

/* What trace, stats and run say of their exit, and of the environment they read. */
#define TRACING_EXIT_STATUS \
	"COMMAND's status (128+N if killed by signal N); 128+N when signal N\n" \
	"stopped tracing before COMMAND ended; otherwise 0; 1 when tracing cannot\n" \
	"start or the output cannot be written (a full disk, a closed pipe); 2 for\n" \
	"bad usage; 126 when COMMAND cannot be executed; 127 when COMMAND is not\n" \
	"found."
#define SUDO_IDS \
	"SUDO_UID, SUDO_GID\n" \
	"The invoking user, under sudo (both or neither: one alone is refused).\n" \
	"COMMAND runs as that user (as root with --run-as-root), and output files\n" \
	"are created as that user."
#define COMMAND_PATH \
	"PATH\n" \
	"Where COMMAND is looked up, as the invoking user would look it up."
#define COMMAND_LIBRARY_PATH \
	"LD_LIBRARY_PATH\n" \
	"Searched, with COMMAND's RUNPATH and the ld.so cache, for the libcuda.so.1\n" \
	"COMMAND will load, so that its probes are in place before it starts."

const struct cp_command cp_commands[CP_CMD_COUNT] = {
	[CP_CMD_TRACE] = { CP_CMD_TRACE, "trace", cp_cmd_trace,
	  "stream launches, allocations, copies, syncs and process events",
	  "[OPTIONS] [-- COMMAND [ARGS...]]",
	  "Trace CUDA driver API calls (kernel launches with names, allocations, frees,\n"
	  "virtual memory, memsets, copies, synchronizations, events, module loads,\n"
	  "process start/exit) with kernel uprobes on libcuda.so.1, and NCCL's calls\n"
	  "(collectives, groups, communicators, each kernel linked to the collective\n"
	  "that launched it) with uprobes on libnccl.so.2. Nothing is injected into\n"
	  "the traced programs.\n"
	  "\n"
	  "Targets: -p PID, -- COMMAND, or, with neither, every process on the host.\n"
	  "COMMAND starts once every probe is attached, as the invoking user under\n"
	  "sudo, and is traced with every process it starts. A process that maps a\n"
	  "driver file no probe covers yet is held until its probes are live.",
	  "At exit one summary line goes to stderr: events delivered, records lost to a\n"
	  "full ring, and launches whose kernel name was never learned.\n"
	  "A first SIGINT/SIGTERM/SIGHUP is passed on to COMMAND (unless it came from\n"
	  "the terminal, which signalled COMMAND itself); if COMMAND has not ended\n"
	  "0.5 s later, or at a second one, tracing stops and COMMAND is left running.\n"
	  "An output blocked at the stop (a pipe nobody reads, a terminal stopped with\n"
	  "Ctrl-S) does not hold cuprobe: what it did not take is dropped (exit 1).\n"
	  "COMMAND runs in cuprobe's process group: a signal sent to the whole group by\n"
	  "a process (kill -INT -- -PGID, timeout(1)) reaches COMMAND directly and is\n"
	  "passed on as well, so COMMAND gets it twice; signal cuprobe's pid instead.",
	  TRACING_EXIT_STATUS,
	  "sudo cuprobe trace -- ./app\n"
	  "Every CUDA driver call of ./app and of the processes it starts, a line each.\n"
	  "\n"
	  "sudo cuprobe trace --json -o calls.json -p 4242\n"
	  "The calls of the running process 4242 as JSON lines in calls.json, until it\n"
	  "exits.\n"
	  "\n"
	  "sudo cuprobe trace --timeline --perfetto trace.json -- python3 train.py\n"
	  "When each kernel ran on the GPU, bounded from host evidence, and a trace the\n"
	  "Perfetto UI opens.\n"
	  "\n"
	  "sudo cuprobe trace -d 10\n"
	  "Every process on the host that uses CUDA, for ten seconds.",
	  { SUDO_IDS, COMMAND_PATH, COMMAND_LIBRARY_PATH },
	},
	[CP_CMD_STATS] = { CP_CMD_STATS, "stats", cp_cmd_stats,
	  "count in BPF maps: kernels, API calls and latency, memory, leaks",
	  "[OPTIONS] [-- COMMAND [ARGS...]]",
	  "Count in BPF maps instead of streaming every call: per process, kernels by\n"
	  "launches (and threads launched), API calls, device memory live and peak.\n"
	  "Nothing per call crosses to userspace. A report is printed every interval\n"
	  "and for each process when it exits; a process that exits with live device\n"
	  "allocations gets a leak report. Targets as for cuprobe trace.",
	  "Map overflows are counted and shown. Signals as for cuprobe trace.",
	  TRACING_EXIT_STATUS,
	  "sudo cuprobe stats --latency -- ./app\n"
	  "The kernels, API calls with their latency, device memory and leaks of ./app\n"
	  "and its processes, each reported when it exits.\n"
	  "\n"
	  "sudo cuprobe stats -i 10 --json -p 4242\n"
	  "A JSON report of the running process 4242 every ten seconds, and one when\n"
	  "it exits.",
	  { SUDO_IDS, COMMAND_PATH, COMMAND_LIBRARY_PATH },
	},
	[CP_CMD_TOP] = { CP_CMD_TOP, "top", cp_cmd_top,
	  "live view of every CUDA process on the host",
	  "[OPTIONS]",
	  "A live view of every CUDA process on the host, refreshed every interval,\n"
	  "sorted by kernel launch rate, with device memory and the most launched\n"
	  "kernel. Counting happens in BPF maps; q quits. Needs a terminal.",
	  NULL,
	  "0; 1 when tracing cannot start; 2 for bad usage, or no terminal (or one\n"
	  "whose TERM ncurses does not know).",
	  "sudo cuprobe top\n"
	  "Every CUDA process on the host, refreshed every second.\n"
	  "\n"
	  "sudo cuprobe top -i 0.5 --lib /opt/driver/libcuda.so.1\n"
	  "Twice a second, with the probes on a libcuda.so.1 that no process has\n"
	  "mapped yet and the library search does not find.",
	  { "TERM\n"
	    "The terminal ncurses draws on; one it does not know is refused (exit 2)." },
	  .no_command = "watches the whole host",
	},
	[CP_CMD_RUN] = { CP_CMD_RUN, "run", cp_cmd_run,
	  "run your own BPF programs on CUDA calls (and in kernels, with -- COMMAND)",
	  "PROG [OPTIONS] [-- COMMAND [ARGS...]]",
	  "Run your own BPF programs on CUDA calls. PROG is a BPF object (.bpf.o) or\n"
	  "BPF C (.bpf.c, compiled with clang as the invoking user against\n"
	  "cuprobe.bpf.h). Its programs go in sections cuda/FAMILY (the call's entry)\n"
	  "or cuda.return/FAMILY (its return), FAMILY one of @FAMILIES@; each\n"
	  "attaches to every variant of its family's APIs in every driver file,\n"
	  "including those mapped later, and, written with CUDA_PROG/CUDA_RETURN_PROG,\n"
	  "sees only the targeted processes. Programs in sections gpu/GLOB (at the\n"
	  "entry of the kernels whose names match GLOB) and gpu.exit/GLOB (before\n"
	  "their exits) are device programs: the kernel's verifier checks them,\n"
	  "cuprobe translates them to PTX (--ptx prints it), and they run inside the\n"
	  "kernels of a COMMAND. This is the one mode that puts code into the traced\n"
	  "process: COMMAND gets a preloaded library that rewrites the matching\n"
	  "kernels' PTX as modules load, so device programs need -- COMMAND (-p and\n"
	  "system-wide refuse them). Kernels with no PTX for the GPU, modules that\n"
	  "cannot be rewritten and globs that match no kernel are each said in one\n"
	  "line and make the exit status 1. Every ring buffer declared with\n"
	  "CUPROBE_RING is printed record by record, every other map at exit (and\n"
	  "every -i), formatted from BTF; so is every device ring (CUPROBE_GPU_RING,\n"
	  "written by GPU threads), read when a sync, a completed query or a blocking\n"
	  "copy proves kernels done and when a process exits. Targets as for cuprobe\n"
	  "trace.",
	  "At exit one summary line per ring goes to stderr: records printed, lost to a\n"
	  "full ring, and shorter than their type; per device ring, records produced,\n"
	  "delivered, lost to a full ring and abandoned by a process that ended before\n"
	  "writing them (per launch with --json). A PROG that is not a BPF object, has\n"
	  "no BTF, no cuda/ or gpu/ program or an unknown section, that the verifier\n"
	  "refuses, or with a device program the GPU cannot run (a helper, map or\n"
	  "instruction it has no translation for, said by name), is said in one line\n"
	  "and exits with 2 before anything is attached, as is a PROG that anyone but\n"
	  "root and the invoking user could change. Signals as for cuprobe trace.",
	  TRACING_EXIT_STATUS,
	  "sudo cuprobe run launch_dims.bpf.c -- ./app\n"
	  "The grid and block sizes of ./app's kernel launches, per kernel, at its exit\n"
	  "(launch_dims.bpf.c is one of the examples, installed in share/cuprobe/examples).\n"
	  "\n"
	  "sudo cuprobe run slow_syncs.bpf.c --set min_us=1000 --json -p 4242\n"
	  "Every synchronization of process 4242 that waited 1 ms or more, with its\n"
	  "stack, as JSON lines.\n"
	  "\n"
	  "sudo cuprobe run prog.bpf.o -i 5 --max-entries 0\n"
	  "Every process on the host, prog.bpf.o's maps printed whole every five\n"
	  "seconds.",
	  { "SUDO_UID, SUDO_GID\n"
	    "The invoking user, under sudo (both or neither: one alone is refused).\n"
	    "COMMAND runs as that user (as root with --run-as-root); output files are\n"
	    "created, and PROG read and compiled, as that user, and PROG must be a file\n"
	    "that nobody but root and that user can change.",
	    "PATH\n"
	    "Where COMMAND, and clang for a PROG in C, are looked up, as the invoking\n"
	    "user would look them up.",
	    COMMAND_LIBRARY_PATH },
	  .operand = { "PROG", "a .bpf.c or .bpf.o file", offsetof(union cp_options, run.program),
		      CP_COMPLETE_BPF_PROGRAM },
	},
	[CP_CMD_EXPORTER] = { CP_CMD_EXPORTER, "exporter", cp_cmd_exporter,
	  "serve per-process, per-GPU metrics to Prometheus (a node agent)",
	  "[OPTIONS]",
	  "A node agent for Prometheus: every CUDA process on the host counted in BPF\n"
	  "maps (nothing per call crosses to userspace) and served on /metrics in the\n"
	  "OpenMetrics text format, the Prometheus text format, or protobuf with\n"
	  "native histograms, as the scraper asks. Labels: pid, command, container\n"
	  "id, cgroup and pod of each process, and the GPU (index and UUID) of each\n"
	  "launch, allocation and copy. An exited process's counts stay for five\n"
	  "minutes (--keep-exited), then go into its container's totals. Runs until\n"
	  "stopped.",
	  "Requests other than GET or HEAD of /metrics and / are refused; no request\n"
	  "changes anything.",
	  "0 when stopped; 1 when it cannot start; 2 for bad usage.",
	  "sudo cuprobe exporter\n"
	  "Serve http://127.0.0.1:9466/metrics, read from the maps every five seconds.\n"
	  "\n"
	  "sudo cuprobe exporter --listen 0.0.0.0:9466 --allow-remote --latency\n"
	  "Serve every address of the host, with API latency histograms.",
	  { NULL },
	  .no_command = "watches the whole host",
	},
	[CP_CMD_PROBES] = { CP_CMD_PROBES, "probes", cp_cmd_probes,
	  "the probe catalogue; what a libcuda or libnccl exports that is not probed",
	  "[--lib PATH]...",
	  "Without --lib: the probe catalogue, one line per API (symbol, family, BPF\n"
	  "programs), then the exports of traced families deliberately not probed,\n"
	  "with the reason. With --lib PATH: what that libcuda or libnccl exports in a\n"
	  "traced family that cuprobe does not probe, and the catalogued symbols it\n"
	  "lacks.\n"
	  "Reads files only: needs no root.",
	  NULL,
	  "0; 1 when a file cannot be read as ELF or the output cannot be written; 2 for\n"
	  "bad usage.",
	  "cuprobe probes\n"
	  "The catalogue: every API probed, and the exports deliberately not probed.\n"
	  "\n"
	  "cuprobe probes --lib /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
	  "What this driver exports in a traced family that cuprobe does not probe.",
	  { NULL },
	  .no_command = "reads files",
	},
};

const struct cp_command *cp_command__find(const char *name)
{
	size_t i;

	for (i = 0; i < CP_CMD_COUNT; i++)
		if (!strcmp(cp_commands[i].name, name))
			return &cp_commands[i];
	return NULL;
}

int cp_command__main(const struct cp_command *command, int argc, char **argv)
{
	union cp_options opts;
	char error[256];

	switch (cp_options__parse(command, argc, argv, &opts, error, sizeof(error))) {
	case CP_PARSE_HELP:
		/* Asked for: a help that cannot be written is a failure too. */
		if (cp_usage__print(command, stdout) || fflush(stdout)) {
			cp_say("cannot write the help: %s", strerror(errno));
			return CP_EXIT_SETUP;
		}
		return 0;
	case CP_PARSE_ERROR:
		cp_say("%s (see cuprobe %s --help)", error, command->name);
		return CP_EXIT_USAGE;
	default:
		return command->run(&opts);
	}
}
