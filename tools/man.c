// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe-man DIR: writes the man pages, made from the command and option
 * tables, into DIR (build time): cuprobe.8, and cuprobe-NAME.8 per command.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli_options.h"
#include "commands.h"

/* One page: DIR/NAME.8 written by the page's writer (command NULL: the index). */
static int write_page(const char *dir, const char *name, const struct cp_command *command)
{
	char path[4096];
	FILE *out;
	int err;

	if (snprintf(path, sizeof(path), "%s/%s.8", dir, name) >= (int)sizeof(path)) {
		fprintf(stderr, "cuprobe-man: %s: name too long\n", dir);
		return -1;
	}
	out = fopen(path, "we");
	if (!out) {
		fprintf(stderr, "cuprobe-man: %s: %s\n", path, strerror(errno));
		return -1;
	}
	err = command ? cp_usage__man_page(command, out, CUPROBE_VERSION) :
	      cp_usage__man_index(cp_commands, CP_CMD_COUNT, out, CUPROBE_VERSION);
	if (fclose(out) || err) {
		fprintf(stderr, "cuprobe-man: cannot write %s\n", path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char name[64];
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: cuprobe-man DIR\n");
		return 2;
	}
	if (write_page(argv[1], "cuprobe", NULL))
		return 1;
	for (i = 0; i < CP_CMD_COUNT; i++) {
		snprintf(name, sizeof(name), "cuprobe-%s", cp_commands[i].name);
		if (write_page(argv[1], name, &cp_commands[i]))
			return 1;
	}
	return 0;
}
