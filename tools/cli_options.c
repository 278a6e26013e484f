// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "cuprobe.h"

/*
 * Every option, once: the parser's getopt table, each command's --help and
 * the man page (cuprobe-man, built beside cuprobe) are all made from it. An
 * option's help is shared by the commands that take it; help_for[command]
 * words it for one command where the shared text would not be true of it.
 */
enum { OPT_JSON = 1000, OPT_LIB, OPT_RUNTIME, OPT_CUDART, OPT_RING_SIZE, OPT_RUN_AS_ROOT,
       OPT_LATENCY, OPT_STACKS, OPT_EXIT_WITH_COMMAND, OPT_SET, OPT_TIMELINE, OPT_PERFETTO,
       OPT_LISTEN, OPT_ALLOW_REMOTE, OPT_MAX_KERNELS, OPT_KEEP_EXITED, OPT_WAKEUP_LATENCY };

#define TRACE (1u << CP_CMD_TRACE)
#define STATS (1u << CP_CMD_STATS)
#define TOP (1u << CP_CMD_TOP)
#define RUN (1u << CP_CMD_RUN)
#define EXPORTER (1u << CP_CMD_EXPORTER)
#define PROBES (1u << CP_CMD_PROBES)
#define TRACING (TRACE | STATS | TOP | RUN | EXPORTER)
#define ALL (TRACING | PROBES)

static const struct cp_option_doc option_docs[] = {
	{ 'p', "pid", 'p', "PID", TRACE | STATS | RUN,
	  "trace this running process and the processes it forks (repeatable, up to\n"
	  "64); it must have libcuda.so.1 mapped unless --lib is given" },
	{ OPT_JSON, "json", 0, NULL, TRACE | STATS | RUN,
	  "one JSON object per line (schema in README.md); with a COMMAND and no -o,\n"
	  "COMMAND's own standard output goes to standard error" },
	{ 'o', "output", 'o', "FILE", TRACE | STATS | RUN,
	  "write to FILE (created as the invoking user, never through a symlink;\n"
	  "an existing FILE is replaced only once tracing has started)" },
	{ OPT_LIB, "lib", 0, "PATH", ALL,
	  "also attach to this libcuda.so.1 (repeatable)",
	  .help_for = { [CP_CMD_PROBES] =
	  "check this libcuda.so.1's exports against the catalogue (repeatable)" } },
	{ OPT_RUNTIME, "runtime", 0, NULL, TRACE,
	  "also probe cudaLaunchKernel (libcudart, or static cudart in COMMAND) to\n"
	  "name kernels through their host stubs" },
	{ OPT_CUDART, "cudart", 0, "PATH", TRACE,
	  "probe cudaLaunchKernel in this file (repeatable; implies --runtime)" },
	{ 'i', "interval", 'i', "SECS", STATS | TOP | RUN | EXPORTER, NULL,
	  .help_for = {
		[CP_CMD_STATS] = "also report every SECS seconds (default: only at exit)",
		[CP_CMD_TOP] = "refresh the view every SECS seconds (default 1)",
		[CP_CMD_RUN] = "also print the maps every SECS seconds (default: only at exit)",
		[CP_CMD_EXPORTER] = "read the metrics from the maps every SECS seconds (default 5)",
	  } },
	{ OPT_LISTEN, "listen", 0, "ADDR:PORT", EXPORTER,
	  "serve /metrics on this address (default 127.0.0.1:9466); an address\n"
	  "other than loopback needs --allow-remote" },
	{ OPT_ALLOW_REMOTE, "allow-remote", 0, NULL, EXPORTER,
	  "allow --listen on an address other than loopback: anyone who can reach it\n"
	  "reads every CUDA process's pid, command, container and kernel names" },
	{ OPT_MAX_KERNELS, "max-kernels", 0, "N", EXPORTER,
	  "name at most N kernels per process: at each read, kernels seen for the\n"
	  "first time take the free places, most launched first; a name once given\n"
	  "stays, and the rest are counted together as kernel=\"other\" (default 50)" },
	{ OPT_KEEP_EXITED, "keep-exited", 0, "SECS", EXPORTER,
	  "keep an exited process's series, with its pid, for SECS seconds (default\n"
	  "300), then add them to its container's totals (pid=\"\"); 0 adds them at\n"
	  "the first refresh after the exit" },
	{ OPT_LATENCY, "latency", 0, NULL, STATS | EXPORTER, NULL,
	  .help_for = {
		[CP_CMD_STATS] =
		"time every call with a return probe: log2 latency histograms, percentiles\n"
		"and the calls that failed (roughly doubles the cost of a call)",
		[CP_CMD_EXPORTER] =
		"time every call with a return probe: API latency histograms and error\n"
		"counts (roughly doubles the cost of a call)",
	  } },
	{ OPT_STACKS, "stacks", 0, NULL, STATS,
	  "record the allocating user stack of each allocation and print it,\n"
	  "symbolized, in leak reports (the program needs frame pointers)" },
	{ OPT_SET, "set", 0, "NAME=VALUE", RUN,
	  "set the integer NAME of PROG (declared const volatile, e.g. a threshold)\n"
	  "before it is loaded (repeatable); VALUE decimal or 0x hex" },
	{ OPT_TIMELINE, "timeline", 0, NULL, TRACE | STATS, NULL,
	  .help_for = {
		[CP_CMD_TRACE] =
		"bound when each kernel ran on the GPU from host evidence (syncs, event\n"
		"queries, blocking copies, exits): a gpu_interval record per launch",
		[CP_CMD_STATS] =
		"bound when each kernel ran on the GPU from host evidence (syncs, event\n"
		"queries, blocking copies, exits): GPU busy time bounds, sync waits and a\n"
		"verdict (gpu-bound or launch-bound) per process (every call is then\n"
		"streamed to userspace)",
	  } },
	{ OPT_PERFETTO, "perfetto", 0, "FILE", TRACE,
	  "also write a trace the Perfetto UI opens (Chrome trace-event JSON): API\n"
	  "calls per thread, kernel bounds per stream with flows from their\n"
	  "launches, memory and queue counters, Xid errors (implies --timeline's\n"
	  "evidence, and return probes on every API)" },
	{ 'd', "duration", 'd', "SECS", TRACING,
	  "stop after SECS seconds (COMMAND, if still running, is left running)",
	  .help_for = { [CP_CMD_TOP] = "stop after SECS seconds",
			[CP_CMD_EXPORTER] = "stop after SECS seconds" } },
	{ OPT_RING_SIZE, "ring-size", 0, "SIZE", TRACE | STATS,
	  "ring buffer size, a power of two from 4K to 1G (K/M/G suffixes);\n"
	  "default 8M" },
	{ OPT_WAKEUP_LATENCY, "wakeup-latency", 0, "US", TRACE | STATS,
	  "wake the reader at least every US microseconds while records arrive\n"
	  "(1 to 10000000, default 250): the bound on a record's delay. The wakeup\n"
	  "is paid inside a traced call, and costs more where waking a thread on\n"
	  "another CPU is slow (VMs): raise it to trade delay for cost" },
	{ OPT_RUN_AS_ROOT, "run-as-root", 0, NULL, TRACE | STATS | RUN,
	  "run COMMAND as root even under sudo" },
	{ OPT_EXIT_WITH_COMMAND, "exit-with-command", 0, NULL, TRACE | STATS | RUN,
	  "stop when COMMAND exits, even if processes it started still run (they\n"
	  "are counted); by default tracing lasts until its whole tree has exited" },
	{ 'v', "verbose", 'v', NULL, TRACING,
	  "more diagnostics on stderr (repeat for libbpf's)",
	  .help_for = { [CP_CMD_RUN] =
	  "more diagnostics on stderr (repeat for libbpf's), and the tail of the\n"
	  "verifier's log when it refuses PROG" } },
	{ 'h', "help", 'h', NULL, ALL, "show this help" },
};

/* Where run's description lists the families, made from the catalogue's table. */
#define FAMILY_LIST "@FAMILIES@"

static struct cp_command_doc command_docs[] = {
	[CP_CMD_TRACE] = { "trace", "[OPTIONS] [-- COMMAND [ARGS...]]",
	  "Trace CUDA driver API calls (kernel launches with names, allocations, frees,\n"
	  "virtual memory, memsets, copies, synchronizations, events, module loads,\n"
	  "process start/exit) with kernel uprobes on libcuda.so.1. Nothing is\n"
	  "injected into the traced programs.\n"
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
	  "passed on as well, so COMMAND gets it twice; signal cuprobe's pid instead.\n"
	  "Exit status: COMMAND's status (128+N if killed by signal N); 128+N when\n"
	  "signal N stopped tracing before COMMAND ended; otherwise 0; 1 when tracing\n"
	  "cannot start or the output cannot be written; 2 for bad usage; 126 when\n"
	  "COMMAND cannot be executed; 127 when COMMAND is not found." },
	[CP_CMD_STATS] = { "stats", "[OPTIONS] [-- COMMAND [ARGS...]]",
	  "Count in BPF maps instead of streaming every call: per process, kernels by\n"
	  "launches (and threads launched), API calls, device memory live and peak.\n"
	  "Nothing per call crosses to userspace. A report is printed every interval\n"
	  "and for each process when it exits; a process that exits with live device\n"
	  "allocations gets a leak report. Targets as for cuprobe trace.",
	  "Map overflows are counted and shown. Signals and exit status as for\n"
	  "cuprobe trace." },
	[CP_CMD_TOP] = { "top", "[OPTIONS]",
	  "A live view of every CUDA process on the host, refreshed every interval,\n"
	  "sorted by kernel launch rate, with device memory and the most launched\n"
	  "kernel. Counting happens in BPF maps; q quits. Needs a terminal.",
	  "Exit status: 0; 1 when tracing cannot start; 2 for bad usage." },
	[CP_CMD_RUN] = { "run", "PROG [OPTIONS] [-- COMMAND [ARGS...]]",
	  "Run your own BPF programs on CUDA calls. PROG is a BPF object (.bpf.o) or\n"
	  "BPF C (.bpf.c, compiled with clang as the invoking user against\n"
	  "cuprobe.bpf.h). Its programs go in sections cuda/FAMILY (the call's entry)\n"
	  "or cuda.return/FAMILY (its return), FAMILY one of " FAMILY_LIST "; each attaches to every\n"
	  "variant of its family's APIs in every driver file, including those mapped\n"
	  "later, and, written with CUDA_PROG/CUDA_RETURN_PROG, sees only the\n"
	  "targeted processes. Every ring buffer declared\n"
	  "with CUPROBE_RING is printed record by record, every other map at exit\n"
	  "(and every -i), formatted from BTF. Targets as for cuprobe trace.\n"
	  "\n"
	  "Device programs, in sections gpu/GLOB (at the entry of every kernel whose\n"
	  "name matches GLOB) and gpu.exit/GLOB (before each of its exits), run inside\n"
	  "the kernels. This is the one mode that puts code into the traced process:\n"
	  "COMMAND gets a preloaded library that rewrites the matching kernels' PTX as\n"
	  "modules load, so device programs need -- COMMAND (-p and system-wide refuse\n"
	  "them). Kernels with no PTX for the GPU, modules that cannot be rewritten and\n"
	  "globs that match no kernel are each said in one line and make the exit\n"
	  "status 1.",
	  "At exit one summary line per ring goes to stderr: records printed, lost to a\n"
	  "full ring, and shorter than their type. A PROG that is not a BPF object, has\n"
	  "no BTF, no cuda/ program or an unknown section, or that the verifier\n"
	  "refuses, is said in one line and exits with 2 before anything is attached.\n"
	  "Signals and exit status as for cuprobe trace." },
	[CP_CMD_EXPORTER] = { "exporter", "[OPTIONS]",
	  "A node agent for Prometheus: every CUDA process on the host counted in BPF\n"
	  "maps (nothing per call crosses to userspace) and served on /metrics in the\n"
	  "OpenMetrics text format, the Prometheus text format, or protobuf with\n"
	  "native histograms, as the scraper asks. Labels: pid, command, container\n"
	  "id, cgroup and pod of each process, and the GPU (index and UUID) of each\n"
	  "launch, allocation and copy. An exited process's counts stay for five\n"
	  "minutes (--keep-exited), then go into its container's totals. Runs until\n"
	  "stopped.",
	  "Requests other than GET or HEAD of /metrics and / are refused; no request\n"
	  "changes anything. Exit status: 0 when stopped; 1 when it cannot start;\n"
	  "2 for bad usage." },
	[CP_CMD_PROBES] = { "probes", "[--lib PATH]...",
	  "Without --lib: the probe catalogue, one line per API (symbol, family, BPF\n"
	  "programs), then the exports of traced families deliberately not probed,\n"
	  "with the reason. With --lib PATH: what that libcuda exports in a traced\n"
	  "family that cuprobe does not probe, and the catalogued symbols it lacks.\n"
	  "Reads files only: needs no root.",
	  "Exit status: 0; 1 when a file cannot be read as ELF; 2 for bad usage." },
};

#define OPTION_COUNT (sizeof(option_docs) / sizeof(option_docs[0]))

const struct cp_option_doc *cp_option_docs(size_t *count)
{
	*count = OPTION_COUNT;
	return option_docs;
}

const char *cp_option_help(const struct cp_option_doc *o, enum cp_command command)
{
	return (unsigned int)command < CP_CMD_COUNT && o->help_for[command] ?
	       o->help_for[command] : o->help;
}

static void print_wrapped(FILE *out, const char *text, int indent, int width);

/*
 * Run's description with FAMILY_LIST replaced by every family users' programs
 * may attach to (the list the section check of cp_tracer__load_program takes),
 * wrapped again as one paragraph. Made once; on failure the text stays as it is.
 */
static void fill_family_list(void)
{
	static char text[2048];
	char families[512], *flat = NULL;
	struct cp_command_doc *run = &command_docs[CP_CMD_RUN];
	const char *at = strstr(run->description, FAMILY_LIST);
	unsigned int family;
	size_t used = 0, len = 0;
	FILE *out;

	if (!at)
		return; /* done already */
	families[0] = '\0';
	for (family = CP_FAMILY_NONE + 1; family < CP_FAMILY_MAX; family++)
		if (cp_family__programmable(family) && used < sizeof(families))
			used += (size_t)snprintf(families + used, sizeof(families) - used, "%s%s",
						 used ? ", " : "", cp_family__name(family));
	if (asprintf(&flat, "%.*s%s%s", (int)(at - run->description), run->description, families,
		     at + strlen(FAMILY_LIST)) < 0)
		return;
	out = fmemopen(text, sizeof(text) - 1, "w");
	if (out) {
		print_wrapped(out, flat, 0, 79);
		len = ftell(out);
		fclose(out);
	}
	if (len > 1 && len < sizeof(text) - 1) {
		text[len - 1] = '\0'; /* print_wrapped's last newline */
		run->description = text;
	}
	free(flat);
}

const struct cp_command_doc *cp_command_doc(enum cp_command command)
{
	fill_family_list();
	return (unsigned int)command < CP_CMD_COUNT ? &command_docs[command] : NULL;
}

/* "  -o, --output FILE" / "      --json": the option as --help lists it. */
static int option_label(const struct cp_option_doc *o, char *buf, size_t len)
{
	if (o->short_name)
		return snprintf(buf, len, "  -%c, --%s%s%s", o->short_name, o->name,
				o->arg ? " " : "", o->arg ? o->arg : "");
	return snprintf(buf, len, "      --%s%s%s", o->name, o->arg ? " " : "",
			o->arg ? o->arg : "");
}

/* text as one paragraph (its newlines are spaces), wrapped into [indent, width) columns. */
static void print_wrapped(FILE *out, const char *text, int indent, int width)
{
	int column = indent;
	const char *p = text;

	while (*p) {
		size_t word;

		while (*p == ' ' || *p == '\n')
			p++;
		word = strcspn(p, " \n");
		if (!word)
			break;
		if (column > indent && column + 1 + (int)word > width) {
			fprintf(out, "\n%*s", indent, "");
			column = indent;
		}
		fprintf(out, "%s%.*s", column > indent ? " " : "", (int)word, p);
		column += (column > indent ? 1 : 0) + (int)word;
		p += word;
	}
	fputc('\n', out);
}

int cp_usage__print(enum cp_command command, FILE *out)
{
	const struct cp_command_doc *doc = cp_command_doc(command);
	char label[64];
	size_t i;
	int n;

	if (!doc)
		return -EINVAL;
	fprintf(out, "usage: cuprobe %s %s\n\n%s\n\nOptions:\n", doc->name, doc->synopsis,
		doc->description);
	for (i = 0; i < OPTION_COUNT; i++) {
		const struct cp_option_doc *o = &option_docs[i];

		if (!(o->commands & (1u << command)))
			continue;
		n = option_label(o, label, sizeof(label));
		fprintf(out, "%s", label);
		/* The help column starts at 23; a longer label puts it on the next line. */
		if (n > 22)
			fprintf(out, "\n%23s", "");
		else
			fprintf(out, "%*s", 23 - n, "");
		print_wrapped(out, cp_option_help(o, command), 23, 79);
	}
	fprintf(out, "\n%s\n", doc->trailer);
	return ferror(out) ? -EIO : 0;
}

/* troff-safe text: backslashes doubled, '-' as \-, a leading '.' or '\'' guarded. */
static void man_text(FILE *out, const char *text)
{
	const char *p;
	bool line_start = true;

	for (p = text; *p; p++) {
		if (line_start && (*p == '.' || *p == '\''))
			fputs("\\&", out);
		if (*p == '\\')
			fputs("\\e", out);
		else if (*p == '-')
			fputs("\\-", out);
		else
			fputc(*p, out);
		line_start = *p == '\n';
	}
}

int cp_usage__man(FILE *out, const char *version)
{
	unsigned int command;
	size_t i;

	fill_family_list();
	fprintf(out, ".TH CUPROBE 8 \"\" \"cuprobe %s\" \"System Administration\"\n", version);
	fputs(".SH NAME\ncuprobe \\- what processes do to the GPU, traced with kernel uprobes on the CUDA driver\n"
	      ".SH SYNOPSIS\n", out);
	for (command = 0; command < CP_CMD_COUNT; command++) {
		fprintf(out, ".B cuprobe %s\n", command_docs[command].name);
		man_text(out, command_docs[command].synopsis);
		fputs("\n.br\n", out);
	}
	fputs(".SH DESCRIPTION\n"
	      "Kernel uprobes on the CUDA driver API (libcuda.so.1) fire in any process; BPF\n"
	      "programs write what happened into BPF maps and a ring buffer, and a GPU agent\n"
	      "thread hands the records to an output. Nothing is injected into the traced\n"
	      "programs, except by cuprobe run's device programs, with -- COMMAND only.\n"
	      "Loading and attaching needs root (CAP_BPF, CAP_PERFMON,\n"
	      "CAP_SYS_ADMIN) and a kernel with BTF.\n", out);
	fputs(".SH COMMANDS\n", out);
	for (command = 0; command < CP_CMD_COUNT; command++) {
		fprintf(out, ".SS %s\n", command_docs[command].name);
		man_text(out, command_docs[command].description);
		fputs("\n.PP\n", out);
		for (i = 0; i < OPTION_COUNT; i++) {
			const struct cp_option_doc *o = &option_docs[i];

			if (!(o->commands & (1u << command)))
				continue;
			fputs(".TP\n", out);
			if (o->short_name)
				fprintf(out, "\\fB\\-%c\\fR, ", o->short_name);
			fprintf(out, "\\fB\\-\\-");
			man_text(out, o->name);
			fprintf(out, "\\fR");
			if (o->arg)
				fprintf(out, " \\fI%s\\fR", o->arg);
			fputc('\n', out);
			man_text(out, cp_option_help(o, command));
			fputc('\n', out);
		}
		fputs(".PP\n", out);
		man_text(out, command_docs[command].trailer);
		fputc('\n', out);
	}
	fputs(".SH FILES\n"
	      "Output files given with \\fB\\-o\\fR are created as the invoking user\n"
	      "(SUDO_UID/SUDO_GID) and never through a symbolic link.\n"
	      ".SH SEE ALSO\n"
	      "The README of the cuprobe sources: the JSON schemas, what the tracks and\n"
	      "reports mean, and how it works.\n", out);
	return ferror(out) ? -EIO : 0;
}

/*
 * The parsers below take plain decimal text only: strtol, strtoull and strtod
 * would also take leading spaces, a sign, hex, exponents, "inf" and "nan".
 */
static const char *skip_digits(const char *p)
{
	while (*p >= '0' && *p <= '9')
		p++;
	return p;
}

int cp_parse_pid(const char *text, pid_t *pid)
{
	unsigned long long value = 0;
	const char *p;

	/* No leading zero either: "010" reads as octal to some tools. */
	if (!text || !pid || *text < '1' || *text > '9' || *skip_digits(text))
		return -EINVAL;
	for (p = text; *p; p++) {
		value = value * 10 + (unsigned int)(*p - '0');
		if (value > INT_MAX)
			return -EINVAL;
	}
	*pid = (pid_t)value;
	return 0;
}

int cp_parse_size(const char *text, uint64_t *bytes)
{
	unsigned long long value;
	unsigned int shift = 0;
	char *end;

	if (!text || !bytes || skip_digits(text) == text)
		return -EINVAL;
	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end) {
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -EINVAL;
		}
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		else if (*end == 'B')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (value > (UINT64_MAX >> shift))
		return -ERANGE;
	*bytes = (uint64_t)value << shift;
	return 0;
}

/* "0", "00", "0.0", ".0": zero seconds written as cp_parse_seconds's syntax would. */
static bool is_zero_seconds(const char *text)
{
	size_t whole = strspn(text, "0"), frac = 0;

	if (text[whole] == '.')
		frac = strspn(text + whole + 1, "0");
	return (whole || frac) && !text[whole + (text[whole] == '.' ? 1 + frac : 0)];
}

int cp_parse_seconds(const char *text, uint64_t *ms)
{
	const char *whole_end, *frac, *frac_end, *p;
	uint64_t whole = 0, part = 0;
	bool nonzero = false;
	int digit = 0;

	if (!text || !ms)
		return -EINVAL;
	/* DIGITS[.DIGITS] or .DIGITS, by hand: strtod's decimal point follows the locale. */
	whole_end = skip_digits(text);
	frac = *whole_end == '.' ? whole_end + 1 : whole_end;
	frac_end = skip_digits(frac);
	if (*frac_end || (whole_end == text && frac_end == frac))
		return -EINVAL;
	for (p = text; p < whole_end; p++) {
		whole = whole * 10 + (unsigned int)(*p - '0');
		nonzero |= *p != '0';
		if (whole > 1000000000)
			return -ERANGE;
	}
	/* Milliseconds: three digits of the fraction, rounded by the fourth. */
	for (p = frac; p < frac_end; p++, digit++) {
		nonzero |= *p != '0';
		if (digit < 3)
			part = part * 10 + (unsigned int)(*p - '0');
		else if (digit == 3 && *p >= '5')
			part++;
	}
	for (; digit < 3; digit++)
		part *= 10;
	if (!nonzero)
		return -EINVAL;
	*ms = whole * 1000 + part;
	if (*ms > 1000000000000ull)
		return -ERANGE;
	/* A tiny positive value must not become 0, which means "no limit". */
	if (!*ms)
		*ms = 1;
	return 0;
}

/* The getopt tables, from option_docs. */
static struct option long_options[OPTION_COUNT + 1];
static char short_options[2 + 2 * OPTION_COUNT + 1];

static void make_getopt_tables(void)
{
	size_t i, n = 0;

	/* "+": stop at the first non-option, so COMMAND's own options stay its own. */
	short_options[n++] = '+';
	short_options[n++] = ':';
	for (i = 0; i < OPTION_COUNT; i++) {
		long_options[i] = (struct option){ option_docs[i].name,
						   option_docs[i].arg ? required_argument : no_argument,
						   NULL, option_docs[i].value };
		if (!option_docs[i].short_name)
			continue;
		short_options[n++] = option_docs[i].short_name;
		if (option_docs[i].arg)
			short_options[n++] = ':';
	}
	short_options[n] = '\0';
}

/* Whether command takes option (by its getopt value). */
static bool command_takes(enum cp_command command, int option)
{
	size_t i;

	for (i = 0; i < OPTION_COUNT; i++)
		if (option_docs[i].value == option)
			return option_docs[i].commands & (1u << command);
	return true; /* ':' and '?' are handled as errors below */
}

/* "-p" or "--latency": the option as a user types it (argv may hold only its value). */
static const char *option_name(int option, char *text, size_t len)
{
	const struct option *o;

	for (o = long_options; o->name; o++) {
		if (o->val != option)
			continue;
		if (option < 256)
			snprintf(text, len, "-%c/--%s", option, o->name);
		else
			snprintf(text, len, "--%s", o->name);
		return text;
	}
	snprintf(text, len, "-%c", option);
	return text;
}

static const char *command_name(enum cp_command command)
{
	return command_docs[command].name;
}

enum cp_parse_result cp_trace_options__parse(int argc, char **argv, struct cp_trace_options *opts,
					     char *error, size_t error_len)
{
	return cp_options__parse(CP_CMD_TRACE, argc, argv, opts, error, error_len);
}

enum cp_parse_result cp_options__parse(enum cp_command command, int argc, char **argv,
				       struct cp_trace_options *opts, char *error, size_t error_len)
{
	int c, i, value_at = -1;
	bool dashdash;
	uint64_t value;

	memset(opts, 0, sizeof(*opts));
	error[0] = '\0';
	make_getopt_tables();
	optind = 1;
	opterr = 0;
	for (;;) {
		c = getopt_long(argc, argv, short_options, long_options, NULL);
		if (c == -1) {
			/* run's PROG: the first operand before "--", options may follow it. */
			if (command != CP_CMD_RUN || opts->program || optind >= argc ||
			    (optind > 1 && optind - 1 != value_at && !strcmp(argv[optind - 1], "--")))
				break;
			if (!*argv[optind]) {
				snprintf(error, error_len, "PROG is an empty name");
				return CP_PARSE_ERROR;
			}
			opts->program = argv[optind++];
			continue;
		}
		/* A value given as its own argument ("-o --") is not the end of options. */
		if (optarg && optind > 1 && optarg == argv[optind - 1])
			value_at = optind - 1;
		if (!command_takes(command, c)) {
			char name[64];

			snprintf(error, error_len, "option '%s' does not apply to cuprobe %s",
				 option_name(c, name, sizeof(name)), command_name(command));
			return CP_PARSE_ERROR;
		}
		switch (c) {
		case 'p':
			if (opts->pid_count == CP_CLI_MAX_PIDS) {
				snprintf(error, error_len, "at most %d -p options", CP_CLI_MAX_PIDS);
				return CP_PARSE_ERROR;
			}
			if (cp_parse_pid(optarg, &opts->pids[opts->pid_count])) {
				snprintf(error, error_len,
					 "invalid PID '%s' for -p/--pid: expected a positive decimal integer",
					 optarg);
				return CP_PARSE_ERROR;
			}
			opts->pid_count++;
			break;
		case OPT_JSON:
			opts->json = true;
			break;
		case 'o':
			if (!*optarg) {
				snprintf(error, error_len, "-o needs a file name");
				return CP_PARSE_ERROR;
			}
			opts->output = optarg;
			break;
		case OPT_LIB:
		case OPT_CUDART: {
			const char **list = c == OPT_LIB ? opts->libs : opts->cudarts;
			size_t *count = c == OPT_LIB ? &opts->lib_count : &opts->cudart_count;

			if (*count == CP_CLI_MAX_LIBS) {
				snprintf(error, error_len, "at most %d %s options", CP_CLI_MAX_LIBS,
					 c == OPT_LIB ? "--lib" : "--cudart");
				return CP_PARSE_ERROR;
			}
			if (!*optarg) {
				snprintf(error, error_len, "%s needs a path",
					 c == OPT_LIB ? "--lib" : "--cudart");
				return CP_PARSE_ERROR;
			}
			list[(*count)++] = optarg;
			if (c == OPT_CUDART)
				opts->runtime = true;
			break;
		}
		case OPT_RUNTIME:
			opts->runtime = true;
			break;
		case 'd':
			if (cp_parse_seconds(optarg, &opts->duration_ms)) {
				snprintf(error, error_len,
					 "invalid duration '%s' for -d/--duration: expected decimal seconds > 0",
					 optarg);
				return CP_PARSE_ERROR;
			}
			break;
		case OPT_RING_SIZE:
			if (cp_parse_size(optarg, &value) || value < 4096 || value > (1ull << 30) ||
			    (value & (value - 1))) {
				snprintf(error, error_len,
					 "invalid ring size '%s' for --ring-size: expected a power of two from 4K to 1G",
					 optarg);
				return CP_PARSE_ERROR;
			}
			opts->ring_bytes = value;
			break;
		case OPT_WAKEUP_LATENCY:
			if (!optarg[0] || strlen(optarg) > 8 ||
			    strspn(optarg, "0123456789") != strlen(optarg) ||
			    !(value = strtoull(optarg, NULL, 10)) || value > 10000000) {
				snprintf(error, error_len,
					 "invalid --wakeup-latency '%s': expected 1 to 10000000 microseconds",
					 optarg);
				return CP_PARSE_ERROR;
			}
			opts->wakeup_latency_ns = value * 1000;
			break;
		case OPT_RUN_AS_ROOT:
			opts->run_as_root = true;
			break;
		case OPT_EXIT_WITH_COMMAND:
			opts->exit_with_command = true;
			break;
		case 'i':
			if (cp_parse_seconds(optarg, &opts->interval_ms) || opts->interval_ms < 10) {
				snprintf(error, error_len,
					 "invalid interval '%s' for -i/--interval: expected decimal seconds >= 0.01",
					 optarg);
				return CP_PARSE_ERROR;
			}
			break;
		case OPT_LATENCY:
			opts->latency = true;
			break;
		case OPT_STACKS:
			opts->stacks = true;
			break;
		case OPT_TIMELINE:
			opts->timeline = true;
			break;
		case OPT_LISTEN:
			if (!*optarg || !strrchr(optarg, ':')) {
				snprintf(error, error_len, "invalid --listen '%s': expected ADDR:PORT", optarg);
				return CP_PARSE_ERROR;
			}
			opts->listen = optarg;
			break;
		case OPT_ALLOW_REMOTE:
			opts->allow_remote = true;
			break;
		case OPT_MAX_KERNELS:
			if (cp_parse_size(optarg, &value) || !value || value > 100000) {
				snprintf(error, error_len,
					 "invalid --max-kernels '%s': expected 1 to 100000", optarg);
				return CP_PARSE_ERROR;
			}
			opts->max_kernels = value;
			break;
		case OPT_KEEP_EXITED:
			/* 0 is a value here ("0", "0.0"), which cp_parse_seconds refuses. */
			if (is_zero_seconds(optarg))
				opts->keep_exited_ms = 0;
			else if (cp_parse_seconds(optarg, &opts->keep_exited_ms) ||
				 opts->keep_exited_ms > 7 * 24 * 3600 * 1000ull) {
				snprintf(error, error_len,
					 "invalid --keep-exited '%s': expected decimal seconds from 0 to 604800",
					 optarg);
				return CP_PARSE_ERROR;
			}
			opts->keep_exited_set = true;
			break;
		case OPT_PERFETTO:
			if (!*optarg) {
				snprintf(error, error_len, "--perfetto needs a file name");
				return CP_PARSE_ERROR;
			}
			opts->perfetto = optarg;
			break;
		case OPT_SET:
			if (opts->setting_count == CP_CLI_MAX_SETTINGS) {
				snprintf(error, error_len, "at most %d --set options", CP_CLI_MAX_SETTINGS);
				return CP_PARSE_ERROR;
			}
			if (!strchr(optarg, '=') || *optarg == '=') {
				snprintf(error, error_len, "invalid --set '%s': expected NAME=VALUE", optarg);
				return CP_PARSE_ERROR;
			}
			opts->settings[opts->setting_count++] = optarg;
			break;
		case 'v':
			opts->verbose++;
			break;
		case 'h':
			return CP_PARSE_HELP;
		case ':':
			snprintf(error, error_len, "option '%s' needs a value", argv[optind - 1]);
			return CP_PARSE_ERROR;
		default:
			if (optopt && optopt < 256)
				snprintf(error, error_len, "unknown option '-%c'", optopt);
			else
				snprintf(error, error_len, "unknown option '%s'", argv[optind - 1]);
			return CP_PARSE_ERROR;
		}
	}
	/* getopt_long consumes a "--"; what follows it is COMMAND. */
	dashdash = optind > 1 && optind - 1 != value_at && !strcmp(argv[optind - 1], "--");
	if (optind < argc) {
		if (!dashdash) {
			snprintf(error, error_len, "unexpected argument '%s' (put COMMAND after --)",
				 argv[optind]);
			return CP_PARSE_ERROR;
		}
		opts->command = &argv[optind];
		opts->command_argc = argc - optind;
	} else if (dashdash) {
		snprintf(error, error_len, "no COMMAND after --");
		return CP_PARSE_ERROR;
	}
	if (command == CP_CMD_RUN && !opts->program) {
		snprintf(error, error_len, "no PROG: cuprobe run needs a .bpf.c or .bpf.o file");
		return CP_PARSE_ERROR;
	}
	if (opts->command && (command == CP_CMD_TOP || command == CP_CMD_EXPORTER)) {
		snprintf(error, error_len, "cuprobe %s watches the whole host: no COMMAND",
			 command_name(command));
		return CP_PARSE_ERROR;
	}
	if (opts->command && command == CP_CMD_PROBES) {
		snprintf(error, error_len, "cuprobe probes reads files: no COMMAND");
		return CP_PARSE_ERROR;
	}
	if (opts->command && opts->pid_count) {
		snprintf(error, error_len, "-p and COMMAND cannot be combined");
		return CP_PARSE_ERROR;
	}
	if (opts->run_as_root && !opts->command) {
		snprintf(error, error_len, "--run-as-root only applies to a COMMAND");
		return CP_PARSE_ERROR;
	}
	if (opts->exit_with_command && !opts->command) {
		snprintf(error, error_len, "--exit-with-command only applies to a COMMAND");
		return CP_PARSE_ERROR;
	}
	for (i = 0; i < (int)opts->pid_count; i++) {
		size_t j;

		for (j = 0; j < (size_t)i; j++)
			if (opts->pids[j] == opts->pids[i]) {
				snprintf(error, error_len, "PID %d given twice", opts->pids[i]);
				return CP_PARSE_ERROR;
			}
	}
	return CP_PARSE_OK;
}
