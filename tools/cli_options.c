// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"

/*
 * Every option, once: the parser's getopt table, each command's --help, the
 * man pages (usage.c; cuprobe-man, built beside cuprobe) and the bash
 * completion (completion.c; cuprobe-completion) are all made from it. An option's help is shared by the commands that take it;
 * help_for[command] words it for one command where the shared text would not
 * be true of it. A common value goes to opts->common; in[command] says where
 * a command keeps a value of its own.
 */
enum { OPT_JSON = 1000, OPT_FORMAT, OPT_LIB, OPT_RUNTIME, OPT_CUDART, OPT_RING_SIZE, OPT_RUN_AS_ROOT,
       OPT_LATENCY, OPT_STACKS, OPT_EXIT_WITH_COMMAND, OPT_SET, OPT_TIMELINE, OPT_PERFETTO,
       OPT_LISTEN, OPT_ALLOW_REMOTE, OPT_MAX_KERNELS, OPT_KEEP_EXITED, OPT_WAKEUP_LATENCY,
       OPT_PTX, OPT_PYTHON, OPT_PYTHON_OWN, OPT_MAX_ENTRIES };

#define TRACE (1u << CP_CMD_TRACE)
#define STATS (1u << CP_CMD_STATS)
#define TOP (1u << CP_CMD_TOP)
#define RUN (1u << CP_CMD_RUN)
#define EXPORTER (1u << CP_CMD_EXPORTER)
#define PROBES (1u << CP_CMD_PROBES)
#define TRACING (TRACE | STATS | TOP | RUN | EXPORTER)
#define ALL (TRACING | PROBES)
/* Where command keeps an option's value: see cp_option_doc.in. */
#define IN(command, member) [CP_CMD_##command] = offsetof(union cp_options, member) + 1

static const struct cp_option_doc option_docs[] = {
	{ 'p', "pid", 'p', "PID", TRACE | STATS | RUN,
	  "trace this running process and the processes it forks (repeatable, up to\n"
	  "64); it must have libcuda.so.1 mapped unless --lib is given",
	  .complete = CP_COMPLETE_CUDA_PID },
	{ OPT_JSON, "json", 0, NULL, TRACE | STATS | RUN,
	  "one JSON object per line (schema: docs/json.md); with a COMMAND and no -o,\n"
	  "COMMAND's own standard output goes to standard error" },
	{ OPT_FORMAT, "format", 0, "NAME", TRACE | STATS,
	  "write records and reports in format NAME: text (the default), json (as\n"
	  "--json), or another of the formats built in (userspace/format/); any\n"
	  "but text sends COMMAND's own standard output to standard error, as --json" },
	{ 'o', "output", 'o', "FILE", TRACE | STATS | RUN,
	  "write to FILE (created as the invoking user, never through a symlink;\n"
	  "an existing FILE is replaced only once tracing has started)",
	  .complete = CP_COMPLETE_FILE },
	{ OPT_LIB, "lib", 0, "PATH", ALL,
	  "also attach to this libcuda.so.1 (repeatable)",
	  .help_for = { [CP_CMD_PROBES] =
	  "check this libcuda.so.1's exports against the catalogue (repeatable)" },
	  .complete = CP_COMPLETE_LIBCUDA },
	{ OPT_RUNTIME, "runtime", 0, NULL, TRACE,
	  "also probe cudaLaunchKernel (libcudart, or static cudart in COMMAND) to\n"
	  "name kernels through their host stubs" },
	{ OPT_CUDART, "cudart", 0, "PATH", TRACE,
	  "probe cudaLaunchKernel in this file (repeatable; implies --runtime)",
	  .complete = CP_COMPLETE_LIBCUDART },
	{ 'i', "interval", 'i', "SECS", STATS | TOP | RUN | EXPORTER, NULL,
	  .in = { IN(STATS, stats.interval_ms), IN(TOP, top.interval_ms), IN(RUN, run.interval_ms),
		  IN(EXPORTER, exporter.interval_ms) },
	  .help_for = {
		[CP_CMD_STATS] = "also report every SECS seconds (default: only at exit)",
		[CP_CMD_TOP] = "refresh the view every SECS seconds (default 1)",
		[CP_CMD_RUN] = "also print the maps every SECS seconds (default: only at exit)",
		[CP_CMD_EXPORTER] = "read the metrics from the maps every SECS seconds (default 5)",
	  } },
	{ OPT_LISTEN, "listen", 0, "ADDR:PORT", EXPORTER,
	  "serve /metrics on this address (default 127.0.0.1:9466): IPv4, [IPv6]\n"
	  "or a host name (served on its first IPv4 address, else its first IPv6);\n"
	  "an address other than loopback, or a name that also resolves to one,\n"
	  "needs --allow-remote" },
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
	  .in = { IN(STATS, stats.latency), IN(EXPORTER, exporter.latency) },
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
	{ OPT_MAX_ENTRIES, "max-entries", 0, "N", RUN,
	  "print at most N entries of each map (default 1000; 0 prints them all):\n"
	  "the rest are counted, under the map and at exit. An array's entries that\n"
	  "are all zero are never printed" },
	{ OPT_PTX, "ptx", 0, NULL, RUN,
	  "print the PTX of PROG's device programs (gpu/ and gpu.exit/ sections) as\n"
	  "they would go into the kernels, in a module ptxas accepts, and exit. PROG\n"
	  "is loaded for the kernel's verifier first (root), nothing is attached and\n"
	  "no COMMAND runs" },
	{ OPT_TIMELINE, "timeline", 0, NULL, TRACE | STATS, NULL,
	  .in = { IN(TRACE, trace.timeline), IN(STATS, stats.timeline) },
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
	{ OPT_PYTHON, "python", 0, NULL, TRACE | STATS | TOP | RUN,
	  "walk the calling thread's Python stack (CPython 3.10 to 3.14) at every\n"
	  "launch, sync, copy and allocation; a process COMMAND starts is held at\n"
	  "cuInit and at each new stack until cuprobe has read it",
	  .help_for = {
		[CP_CMD_TRACE] =
		"walk the calling thread's Python stack (CPython 3.10 to 3.14) at every\n"
		"launch, sync, copy and allocation: each such record names its innermost\n"
		"frame (text), or carries its frames as a py_stack array (--json, and the\n"
		"args of --perfetto's slices); a process COMMAND starts is held at cuInit\n"
		"and at each new stack until cuprobe has read it",
		[CP_CMD_STATS] =
		"walk the calling thread's Python stack (CPython 3.10 to 3.14) at every\n"
		"launch, sync, copy and allocation, and report them by Python line (the\n"
		"innermost frame): launches, syncs and the time blocked in them,\n"
		"allocations; with --timeline, each line's kernels, their GPU time bound\n"
		"and a verdict (every call is then streamed to userspace); a process\n"
		"COMMAND starts is held at cuInit and at each new stack until read",
		[CP_CMD_TOP] =
		"walk the calling thread's Python stack (CPython 3.10 to 3.14) at every\n"
		"launch, sync, copy and allocation, and show a PYTHON LINE column: the\n"
		"FILE:LINE (file name without its directory) of the innermost frame of\n"
		"each process's most recent launch that had a Python stack",
		[CP_CMD_RUN] =
		"walk the calling thread's Python stack (CPython 3.10 to 3.14) at the\n"
		"entry of each call PROG's programs are on: cuprobe_python_stack_id(ctx)\n"
		"hands them its id (0: none), a cuprobe_py_stack_t member of a map is\n"
		"printed as the stack's innermost frame; a process COMMAND starts is held\n"
		"at cuInit and at each new stack until cuprobe has read it",
	  } },
	{ OPT_PYTHON_OWN, "python-own", 0, NULL, STATS,
	  "with --python (implied): name each call by the innermost frame of the\n"
	  "program's own code, outside site-packages and the standard library (the\n"
	  "line of train.py that called into torch, not torch's own)" },
	{ OPT_PERFETTO, "perfetto", 0, "FILE", TRACE,
	  "also write a trace the Perfetto UI opens (Chrome trace-event JSON): API\n"
	  "calls per thread, kernel bounds per stream with flows from their\n"
	  "launches, memory and queue counters, Xid errors (implies --timeline's\n"
	  "evidence, and return probes on every API)",
	  .complete = CP_COMPLETE_FILE },
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
	  "run COMMAND as root even under sudo; only COMMAND: output files are\n"
	  "still created as the invoking user",
	  .help_for = { [CP_CMD_RUN] =
	  "run COMMAND as root even under sudo; only COMMAND: output files are\n"
	  "still created, and PROG read and compiled, as the invoking user" } },
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

#define OPTION_COUNT (sizeof(option_docs) / sizeof(option_docs[0]))

const struct cp_option_doc *cp_option_docs(size_t *count)
{
	*count = OPTION_COUNT;
	return option_docs;
}

const char *cp_option_help(const struct cp_option_doc *o, enum cp_command_id command)
{
	return (unsigned int)command < CP_CMD_COUNT && o->help_for[command] ?
	       o->help_for[command] : o->help;
}

bool cp_option_takes(const struct cp_option_doc *o, enum cp_command_id command)
{
	return (unsigned int)command < CP_CMD_COUNT && (o->commands & (1u << command));
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

int cp_parse_count(const char *text, uint64_t min, uint64_t max, uint64_t *value)
{
	uint64_t parsed = 0;
	const char *p;

	if (!text || !value || !*text || *skip_digits(text))
		return -EINVAL;
	for (p = text; *p; p++) {
		if (parsed > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		parsed = parsed * 10 + (unsigned int)(*p - '0');
	}
	if (parsed < min || parsed > max)
		return -ERANGE;
	*value = parsed;
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
		if (whole > CP_SECONDS_MAX)
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
	if (*ms > CP_SECONDS_MAX * 1000ull)
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

/* The row of an option (by its getopt value); NULL for ':' and '?', errors said below. */
static const struct cp_option_doc *option_doc(int option)
{
	size_t i;

	for (i = 0; i < OPTION_COUNT; i++)
		if (option_docs[i].value == option)
			return &option_docs[i];
	return NULL;
}

/* Where command keeps the value of an option that has a place of its own in each command. */
static void *value_in(const struct cp_option_doc *o, const struct cp_command *command,
		      union cp_options *opts)
{
	return (char *)opts + o->in[command->id] - 1;
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

enum cp_parse_result cp_options__parse(const struct cp_command *command, int argc, char **argv,
				       union cp_options *opts, char *error, size_t error_len)
{
	struct cp_common_options *common = &opts->common;
	const struct cp_option_doc *o;
	const char **operand = command->operand.name ?
		(const char **)((char *)opts + command->operand.at) : NULL;
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
			if (!operand || *operand || optind >= argc ||
			    (optind > 1 && optind - 1 != value_at && !strcmp(argv[optind - 1], "--")))
				break;
			if (!*argv[optind]) {
				snprintf(error, error_len, "%s is an empty name", command->operand.name);
				return CP_PARSE_ERROR;
			}
			*operand = argv[optind++];
			continue;
		}
		/* A value given as its own argument ("-o --") is not the end of options. */
		if (optarg && optind > 1 && optarg == argv[optind - 1])
			value_at = optind - 1;
		o = option_doc(c);
		if (o && !cp_option_takes(o, command->id)) {
			char name[64];

			snprintf(error, error_len, "option '%s' does not apply to cuprobe %s",
				 option_name(c, name, sizeof(name)), command->name);
			return CP_PARSE_ERROR;
		}
		switch (c) {
		case 'p':
			if (common->pid_count == CP_CLI_MAX_PIDS) {
				snprintf(error, error_len, "at most %d -p options", CP_CLI_MAX_PIDS);
				return CP_PARSE_ERROR;
			}
			if (cp_parse_pid(optarg, &common->pids[common->pid_count])) {
				snprintf(error, error_len,
					 "invalid PID '%s' for -p/--pid: expected a positive decimal integer",
					 optarg);
				return CP_PARSE_ERROR;
			}
			common->pid_count++;
			break;
		case OPT_JSON:
			common->format = CP_FORMAT_JSON;
			break;
		case OPT_FORMAT:
			common->format = cp_format__by_name(optarg);
			if (common->format == CP_FORMAT_MAX) {
				snprintf(error, error_len, "--format: no format called '%s'", optarg);
				return CP_PARSE_ERROR;
			}
			break;
		case 'o':
			if (!*optarg) {
				snprintf(error, error_len, "-o needs a file name");
				return CP_PARSE_ERROR;
			}
			common->output = optarg;
			break;
		case OPT_LIB:
		case OPT_CUDART: {
			const char **list = c == OPT_LIB ? common->libs : opts->trace.cudarts;
			size_t *count = c == OPT_LIB ? &common->lib_count : &opts->trace.cudart_count;

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
				opts->trace.runtime = true;
			break;
		}
		case OPT_RUNTIME:
			opts->trace.runtime = true;
			break;
		case 'd': {
			int err = cp_parse_seconds(optarg, &common->duration_ms);

			if (err) {
				snprintf(error, error_len, err == -ERANGE ?
					 "invalid duration '%s' for -d/--duration: at most %u seconds" :
					 "invalid duration '%s' for -d/--duration: expected decimal seconds > 0",
					 optarg, CP_SECONDS_MAX);
				return CP_PARSE_ERROR;
			}
			break;
		}
		case OPT_RING_SIZE:
			if (cp_parse_size(optarg, &value) || value < 4096 || value > (1ull << 30) ||
			    (value & (value - 1))) {
				snprintf(error, error_len,
					 "invalid ring size '%s' for --ring-size: expected a power of two from 4K to 1G",
					 optarg);
				return CP_PARSE_ERROR;
			}
			common->ring_bytes = value;
			break;
		case OPT_WAKEUP_LATENCY:
			if (cp_parse_count(optarg, 1, 10000000, &value)) {
				snprintf(error, error_len,
					 "invalid --wakeup-latency '%s': expected 1 to 10000000 microseconds",
					 optarg);
				return CP_PARSE_ERROR;
			}
			common->wakeup_latency_ns = value * 1000;
			break;
		case OPT_RUN_AS_ROOT:
			common->run_as_root = true;
			break;
		case OPT_EXIT_WITH_COMMAND:
			common->exit_with_command = true;
			break;
		case 'i': {
			uint64_t *interval_ms = value_in(o, command, opts);

			if (cp_parse_seconds(optarg, interval_ms) || *interval_ms < 10) {
				snprintf(error, error_len,
					 "invalid interval '%s' for -i/--interval: expected decimal seconds from 0.01 to %u",
					 optarg, CP_SECONDS_MAX);
				return CP_PARSE_ERROR;
			}
			break;
		}
		case OPT_LATENCY:
		case OPT_TIMELINE:
			*(bool *)value_in(o, command, opts) = true;
			break;
		case OPT_STACKS:
			opts->stats.stacks = true;
			break;
		case OPT_PYTHON:
			common->python = true;
			break;
		case OPT_PYTHON_OWN:
			common->python = true;
			opts->stats.python_own = true;
			break;
		case OPT_LISTEN:
			if (!*optarg || !strrchr(optarg, ':')) {
				snprintf(error, error_len, "invalid --listen '%s': expected ADDR:PORT", optarg);
				return CP_PARSE_ERROR;
			}
			opts->exporter.listen = optarg;
			break;
		case OPT_ALLOW_REMOTE:
			opts->exporter.allow_remote = true;
			break;
		case OPT_MAX_KERNELS:
			if (cp_parse_count(optarg, 1, 100000, &value)) {
				snprintf(error, error_len,
					 "invalid --max-kernels '%s': expected 1 to 100000", optarg);
				return CP_PARSE_ERROR;
			}
			opts->exporter.max_kernels = value;
			break;
		case OPT_KEEP_EXITED:
			/* 0 is a value here ("0", "0.0"), which cp_parse_seconds refuses. */
			if (is_zero_seconds(optarg))
				opts->exporter.keep_exited_ms = 0;
			else if (cp_parse_seconds(optarg, &opts->exporter.keep_exited_ms) ||
				 opts->exporter.keep_exited_ms > 7 * 24 * 3600 * 1000ull) {
				snprintf(error, error_len,
					 "invalid --keep-exited '%s': expected decimal seconds from 0 to 604800",
					 optarg);
				return CP_PARSE_ERROR;
			}
			opts->exporter.keep_exited_set = true;
			break;
		case OPT_PERFETTO:
			if (!*optarg) {
				snprintf(error, error_len, "--perfetto needs a file name");
				return CP_PARSE_ERROR;
			}
			opts->trace.perfetto = optarg;
			break;
		case OPT_MAX_ENTRIES:
			if (cp_parse_count(optarg, 0, UINT32_MAX, &value)) {
				snprintf(error, error_len,
					 "invalid --max-entries '%s': expected 0 (all) to %u", optarg,
					 UINT32_MAX);
				return CP_PARSE_ERROR;
			}
			opts->run.max_entries = value;
			opts->run.max_entries_set = true;
			break;
		case OPT_PTX:
			opts->run.ptx = true;
			break;
		case OPT_SET:
			if (opts->run.setting_count == CP_CLI_MAX_SETTINGS) {
				snprintf(error, error_len, "at most %d --set options", CP_CLI_MAX_SETTINGS);
				return CP_PARSE_ERROR;
			}
			if (!strchr(optarg, '=') || *optarg == '=') {
				snprintf(error, error_len, "invalid --set '%s': expected NAME=VALUE", optarg);
				return CP_PARSE_ERROR;
			}
			opts->run.settings[opts->run.setting_count++] = optarg;
			break;
		case 'v':
			common->verbose++;
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
		common->command = &argv[optind];
		common->command_argc = argc - optind;
	} else if (dashdash) {
		snprintf(error, error_len, "no COMMAND after --");
		return CP_PARSE_ERROR;
	}
	if (operand && !*operand) {
		snprintf(error, error_len, "no %s: cuprobe %s needs %s", command->operand.name,
			 command->name, command->operand.what);
		return CP_PARSE_ERROR;
	}
	if (common->command && command->no_command) {
		snprintf(error, error_len, "cuprobe %s %s: no COMMAND", command->name,
			 command->no_command);
		return CP_PARSE_ERROR;
	}
	if (common->command && common->pid_count) {
		snprintf(error, error_len, "-p and COMMAND cannot be combined");
		return CP_PARSE_ERROR;
	}
	if (command->id == CP_CMD_RUN && opts->run.ptx && (common->command || common->pid_count)) {
		snprintf(error, error_len, "--ptx prints PROG's PTX and exits: no COMMAND or -p");
		return CP_PARSE_ERROR;
	}
	if (common->run_as_root && !common->command) {
		snprintf(error, error_len, "--run-as-root only applies to a COMMAND");
		return CP_PARSE_ERROR;
	}
	if (common->exit_with_command && !common->command) {
		snprintf(error, error_len, "--exit-with-command only applies to a COMMAND");
		return CP_PARSE_ERROR;
	}
	for (i = 0; i < (int)common->pid_count; i++) {
		size_t j;

		for (j = 0; j < (size_t)i; j++)
			if (common->pids[j] == common->pids[i]) {
				snprintf(error, error_len, "PID %d given twice", common->pids[i]);
				return CP_PARSE_ERROR;
			}
	}
	return CP_PARSE_OK;
}
