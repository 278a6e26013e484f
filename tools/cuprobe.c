// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* cuprobe: the command-line front end. Its commands are the rows of commands.c. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli_options.h"
#include "commands.h"
#include "session.h"

#ifndef CUPROBE_VERSION
#define CUPROBE_VERSION "0.1.0"
#endif

/* `cuprobe --help` to out; the exit status it makes. */
static int general_help(FILE *out, int status)
{
	if (cp_usage__general(out, cp_commands, CP_CMD_COUNT) || fflush(out)) {
		cp_say("cannot write the help");
		return CP_EXIT_SETUP;
	}
	return status;
}

static const struct cp_command *command_named(const char *name)
{
	const struct cp_command *command = cp_command__find(name);

	if (!command)
		cp_say("unknown command '%s' (see cuprobe --help)", name);
	return command;
}

int main(int argc, char **argv)
{
	const struct cp_command *command;

	/*
	 * A closed pipe is a write error every command says and exits 1 for,
	 * not a death by signal (the commands it starts get SIGPIPE back).
	 */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		return general_help(stderr, CP_EXIT_USAGE);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    (!strcmp(argv[1], "help") && argc == 2))
		return general_help(stdout, 0);
	if (!strcmp(argv[1], "--version")) {
		printf("cuprobe %s\n", CUPROBE_VERSION);
		return fflush(stdout) ? CP_EXIT_SETUP : 0;
	}
	/* "cuprobe help trace": as "cuprobe trace --help". */
	if (!strcmp(argv[1], "help")) {
		if (argc > 3) {
			cp_say("help takes one COMMAND (see cuprobe --help)");
			return CP_EXIT_USAGE;
		}
		command = command_named(argv[2]);
		return command ? cp_command__main(command, 2, (char *[]){ argv[2], "--help", NULL }) :
		       CP_EXIT_USAGE;
	}
	command = command_named(argv[1]);
	return command ? cp_command__main(command, argc - 1, argv + 1) : CP_EXIT_USAGE;
}
