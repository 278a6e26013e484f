// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"

const char cp_trace_usage[] =
"usage: cuprobe trace [OPTIONS] [-- COMMAND [ARGS...]]\n"
"\n"
"Trace CUDA driver API calls (kernel launches with names, allocations, frees,\n"
"copies, synchronizations, process start/exit) with kernel uprobes on\n"
"libcuda.so.1. Nothing is injected into the traced programs.\n"
"\n"
"Targets (system-wide when neither -p nor COMMAND is given):\n"
"  -p, --pid PID        trace this running process and the processes it forks\n"
"                       (repeatable, up to 64); it must have libcuda.so.1 mapped\n"
"                       unless --lib is given\n"
"  -- COMMAND [ARGS]    start COMMAND once every probe is attached, trace it and\n"
"                       its children, and exit with its exit status; under sudo\n"
"                       it runs as the invoking user (SUDO_UID/SUDO_GID)\n"
"\n"
"Options:\n"
"      --json           one JSON object per line (schema in README.md)\n"
"  -o, --output FILE    write events to FILE (created as the invoking user,\n"
"                       never through a symlink) instead of standard output\n"
"      --lib PATH       also attach to this libcuda.so.1 (repeatable)\n"
"      --runtime        also probe cudaLaunchKernel (libcudart, or static cudart\n"
"                       in COMMAND) to name kernels through their host stubs\n"
"      --cudart PATH    probe cudaLaunchKernel in this file (repeatable;\n"
"                       implies --runtime)\n"
"  -d, --duration SECS  stop after SECS seconds\n"
"      --ring-size SIZE ring buffer size, a power of two (K/M/G suffixes);\n"
"                       default 8M\n"
"      --run-as-root    run COMMAND as root even under sudo\n"
"  -v, --verbose        more diagnostics on stderr (repeat for libbpf's)\n"
"  -h, --help           show this help\n"
"\n"
"At exit one summary line goes to stderr: events delivered, records lost to a\n"
"full ring, and launches whose kernel name was never learned.\n"
"Exit status: COMMAND's status (128+N if killed by signal N); otherwise 0;\n"
"1 when tracing cannot start; 2 for bad usage; 126 when COMMAND cannot be\n"
"executed (permission denied, not an executable format); 127 when COMMAND is\n"
"not found.\n";

const char cp_stats_usage[] =
"usage: cuprobe stats [-p PID]... [--interval SECS] [--latency] [--stacks] [--json]\n"
"                     [-o FILE] [--lib PATH]... [-d SECS] [-- COMMAND [ARGS...]]\n"
"\n"
"Count in BPF maps instead of streaming every call: per process, kernels by\n"
"launches (and threads launched), API calls, device memory live and peak.\n"
"Nothing per call crosses to userspace. A report is printed every interval\n"
"and for each process when it exits; a process that exits with live device\n"
"allocations gets a leak report.\n"
"\n"
"Targets: as for cuprobe trace (-p PID, -- COMMAND, or system-wide).\n"
"\n"
"Options:\n"
"      --interval SECS  also report every SECS seconds (default: only at exit)\n"
"      --latency        time every call with a return probe: log2 latency\n"
"                       histograms, percentiles and the calls that failed\n"
"      --stacks         record the allocating user stack of each allocation and\n"
"                       print it, symbolized, in leak reports (the program needs\n"
"                       frame pointers for deep stacks)\n"
"      --json           one JSON object per report (schema in README.md)\n"
"  -o, --output FILE    write reports to FILE (created as the invoking user)\n"
"      --lib PATH       also attach to this libcuda.so.1 (repeatable)\n"
"  -d, --duration SECS  stop after SECS seconds\n"
"      --run-as-root    run COMMAND as root even under sudo\n"
"  -v, --verbose        more diagnostics on stderr\n"
"  -h, --help           show this help\n"
"\n"
"Map overflows are counted and shown. Exit status as for cuprobe trace (126 when\n"
"COMMAND cannot be executed, 127 when it is not found).\n";

const char cp_top_usage[] =
"usage: cuprobe top [--interval SECS] [--lib PATH]... [-d SECS]\n"
"\n"
"A live view of every CUDA process on the host, refreshed every interval\n"
"(default 1 s), sorted by kernel launch rate, with device memory and the\n"
"most launched kernel. Counting happens in BPF maps; q quits.\n"
"\n"
"Options:\n"
"      --interval SECS  refresh period (default 1)\n"
"      --lib PATH       also attach to this libcuda.so.1 (repeatable)\n"
"  -d, --duration SECS  quit after SECS seconds\n"
"  -v, --verbose        more diagnostics on stderr\n"
"  -h, --help           show this help\n";

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

enum { OPT_JSON = 1000, OPT_LIB, OPT_RUNTIME, OPT_CUDART, OPT_RING_SIZE, OPT_RUN_AS_ROOT,
       OPT_INTERVAL, OPT_LATENCY, OPT_STACKS, OPT_EXIT_WITH_COMMAND };

static const struct option long_options[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "output", required_argument, NULL, 'o' },
	{ "lib", required_argument, NULL, OPT_LIB },
	{ "runtime", no_argument, NULL, OPT_RUNTIME },
	{ "cudart", required_argument, NULL, OPT_CUDART },
	{ "duration", required_argument, NULL, 'd' },
	{ "ring-size", required_argument, NULL, OPT_RING_SIZE },
	{ "run-as-root", no_argument, NULL, OPT_RUN_AS_ROOT },
	{ "exit-with-command", no_argument, NULL, OPT_EXIT_WITH_COMMAND },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "latency", no_argument, NULL, OPT_LATENCY },
	{ "stacks", no_argument, NULL, OPT_STACKS },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Which options each command takes: a bit per option, by its getopt value. */
static bool command_takes(enum cp_command command, int option)
{
	switch (option) {
	case 'v': case 'h': case 'd': case OPT_LIB:
		return true;
	case 'p': case 'o': case OPT_JSON: case OPT_RUN_AS_ROOT: case OPT_RING_SIZE:
	case OPT_EXIT_WITH_COMMAND:
		return command != CP_CMD_TOP;
	case OPT_RUNTIME: case OPT_CUDART:
		return command == CP_CMD_TRACE;
	case OPT_INTERVAL:
		return command != CP_CMD_TRACE;
	case OPT_LATENCY: case OPT_STACKS:
		return command == CP_CMD_STATS;
	default:
		return true; /* ':' and '?' are handled as errors below */
	}
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
	return command == CP_CMD_STATS ? "stats" : command == CP_CMD_TOP ? "top" : "trace";
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
	/* "+": stop at the first non-option, so COMMAND's own options stay its own. */
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:p:o:d:vh", long_options, NULL)) != -1) {
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
		case OPT_RUN_AS_ROOT:
			opts->run_as_root = true;
			break;
		case OPT_EXIT_WITH_COMMAND:
			opts->exit_with_command = true;
			break;
		case OPT_INTERVAL:
			if (cp_parse_seconds(optarg, &opts->interval_ms) || opts->interval_ms < 10) {
				snprintf(error, error_len,
					 "invalid interval '%s' for --interval: expected decimal seconds >= 0.01",
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
	if (opts->command && command == CP_CMD_TOP) {
		snprintf(error, error_len, "cuprobe top watches the whole host: no COMMAND");
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
