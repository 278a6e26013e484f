// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Debian packages (tools/deploy/debian/package.cmake) as an operator gets
 * them: built by CPack from this build tree, lintian clean (every tag it
 * still finds is overridden with its reason), installed with dpkg -i, used
 * from the installed files (cuprobe --version, a trace of the simulated
 * driver, pkg-config, the systemd unit verified), and purged leaving nothing
 * behind: no file of the packages, no directory they made, no dpkg record,
 * no path named cuprobe that was not there before. It changes the system, so
 * it refuses to run where one of the packages is installed already, and its
 * teardown purges them whatever failed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"

static const char *const packages[] = { "cuprobe", "libcuprobe0", "libcuprobe-dev" };
#define PACKAGES (sizeof(packages) / sizeof(packages[0]))
#define SEARCHED "/usr /etc /lib /var/lib/dpkg/info /var/lib/systemd"

static char *work;
static bool installed_by_us;

/* Runs a shell command line in work: its status; stdout and stderr together (malloc'd) when asked. */
__attribute__((format(printf, 2, 3)))
static int sh(char **out, const char *fmt, ...)
{
	char *command, *out_path = path_join(work, "output");
	struct run_opts opts = { .stdout_path = out_path, .stderr_path = out_path };
	va_list ap;
	int status;

	va_start(ap, fmt);
	cr_assert_geq(vasprintf(&command, fmt, ap), 0);
	va_end(ap);
	{
		char *argv[] = { "/bin/sh", "-c", command, NULL };

		status = run_program(argv, &opts, NULL);
	}
	if (out)
		*out = read_text(out_path);
	free(command);
	free(out_path);
	return status;
}

static bool package_installed(const char *name)
{
	char *out = NULL;
	bool installed = sh(&out, "dpkg-query -W -f='${db:Status-Status}' %s", name) == 0 && out &&
			 !strcmp(out, "installed");

	free(out);
	return installed;
}

static void setup(void)
{
	require_root();
	work = make_tmpdir();
	installed_by_us = false;
	for (size_t i = 0; i < PACKAGES; i++)
		cr_assert(!package_installed(packages[i]),
			  "%s is installed on this machine: this test installs and purges it, so it will not run here",
			  packages[i]);
}

static void teardown(void)
{
	if (installed_by_us)
		sh(NULL, "dpkg --purge cuprobe libcuprobe-dev libcuprobe0");
	remove_tree(work);
	free(work);
}

TestSuite(package, .init = setup, .fini = teardown);

/* Every path (files, links, directories) the .deb files in work/debs hold, absolute, one a line. */
static char *package_paths(void)
{
	char *out = NULL;

	cr_assert_eq(sh(&out, "for d in '%s'/debs/*.deb; do dpkg-deb --fsys-tarfile \"$d\" | tar -t; done | "
			      "sed 's|^\\./|/|; s|/$||' | grep -v '^\\.\\?$' | sort -u", work), 0,
		     "reading the packages' contents: %s", out ? out : "");
	return out;
}

static char *cuprobe_paths(void)
{
	char *out = NULL;

	sh(&out, "find " SEARCHED " -xdev -name '*cuprobe*' 2>/dev/null | sort");
	return out ? out : strdup("");
}

/* The paths of list (one a line) that exist now, one a line. */
static char *existing(const char *list)
{
	char *copy = strdup(list), *save = NULL, *path, *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);
	struct stat st;

	cr_assert(copy && mem);
	for (path = strtok_r(copy, "\n", &save); path; path = strtok_r(NULL, "\n", &save))
		if (lstat(path, &st) == 0)
			fprintf(mem, "%s\n", path);
	fclose(mem);
	free(copy);
	return out;
}

Test(package, builds_lints_installs_traces_and_purges_leaving_nothing, .timeout = 300)
{
	char *out = NULL, *paths, *before, *cuprobe_before, *after, *cuprobe_after, version[64];
	int status;

	/* Built from this build tree, into work/debs. */
	status = sh(&out, "cd '%s' && %s -G DEB --config '%s/CPackConfig.cmake' -B '%s/debs'", work,
		    CPACK_BIN, BUILD_DIR, work);
	cr_assert_eq(status, 0, "cpack: %s", out);
	free(out);
	cr_assert_eq(sh(&out, "ls '%s'/debs/*.deb | wc -l", work), 0);
	cr_assert_eq(atoi(out), 3, "three packages: cuprobe, libcuprobe0, libcuprobe-dev");
	free(out);

	/* Clean at every level lintian has, once its overrides (with their reasons) are read. */
	status = sh(&out, "lintian --pedantic --display-info --fail-on error,warning,info,pedantic '%s'/debs/*.deb",
		    work);
	cr_assert_eq(status, 0, "lintian: %s", out);
	cr_assert(!strstr(out, "\nE: ") && !strstr(out, "\nW: ") && strncmp(out, "E: ", 3) &&
		  strncmp(out, "W: ", 3), "lintian: %s", out);
	free(out);

	paths = package_paths();
	cr_assert_not_null(strstr(paths, "\n/usr/share/bash-completion/completions/cuprobe\n"),
			   "the packages hold no bash completion:\n%s", paths);
	before = existing(paths);
	cuprobe_before = cuprobe_paths();

	installed_by_us = true;
	status = sh(&out, "dpkg -i '%s'/debs/*.deb", work);
	cr_assert_eq(status, 0, "dpkg -i: %s", out);
	free(out);
	for (size_t i = 0; i < PACKAGES; i++)
		cr_assert(package_installed(packages[i]), "%s is not installed", packages[i]);

	/* Used from the installed files: the simulated driver and drv_launch come from the build tree. */
	cr_assert_eq(sh(&out, "/usr/bin/cuprobe --version"), 0, "cuprobe --version: %s", out);
	snprintf(version, sizeof(version), "%s", CUPROBE_VERSION);
	cr_assert_not_null(strstr(out, version), "cuprobe --version says %s", out);
	free(out);
	status = sh(&out, "/usr/bin/cuprobe trace --json -o '%s/trace.json' --lib '%s' -- '%s' 10",
		    work, CUDA_SIM_LIB, DRV_LAUNCH);
	cr_assert_eq(status, 0, "cuprobe trace: %s", out);
	free(out);
	{
		char *trace_path = path_join(work, "trace.json");
		json_t *events = load_json_lines(trace_path);

		cr_assert_eq(count_events(events, "launch", NULL), 10, "the installed cuprobe traced %zu launches",
			     count_events(events, "launch", NULL));
		json_decref(events);
		free(trace_path);
	}
	cr_assert_eq(sh(&out, "pkg-config --modversion cuprobe"), 0, "pkg-config: %s", out);
	cr_assert_eq(strncmp(out, version, strlen(version)), 0, "pkg-config says %s", out);
	free(out);
	status = sh(&out, "systemd-analyze verify --man=no /usr/lib/systemd/system/cuprobe-exporter.service");
	cr_assert_eq(status, 0, "the installed unit: %s", out);
	cr_assert_eq(out ? strlen(out) : 0, 0, "systemd-analyze verify has something to say: %s", out);
	free(out);

	/* bash-completion's loader finds the installed completion, which completes cuprobe. */
	status = sh(&out, "BASH_COMPLETION_USER_DIR='%s/none' XDG_DATA_DIRS=/usr/share bash --norc -c '"
			  "source %s && __load_completion cuprobe && complete -p cuprobe && "
			  "COMP_LINE=\"cuprobe trace --j\" COMP_POINT=17 COMP_WORDS=(cuprobe trace --j) COMP_CWORD=2 && "
			  "_cuprobe cuprobe --j trace; echo \"${COMPREPLY[*]}\"'", work, BASH_COMPLETION);
	cr_assert_eq(status, 0, "the installed bash completion: %s", out);
	cr_assert_str_eq(out, "complete -F _cuprobe cuprobe\n--json\n", "the installed bash completion: %s", out);
	free(out);
	status = sh(&out, "dpkg --purge cuprobe libcuprobe-dev libcuprobe0");
	cr_assert_eq(status, 0, "dpkg --purge: %s", out);
	free(out);
	installed_by_us = false;
	for (size_t i = 0; i < PACKAGES; i++)
		cr_assert(!package_installed(packages[i]), "%s is still installed", packages[i]);
	cr_assert_neq(sh(NULL, "dpkg-query -W cuprobe libcuprobe0 libcuprobe-dev"), 0,
		      "dpkg still knows the packages");
	after = existing(paths);
	cr_assert_str_eq(after, before, "the packages' paths before the install:\n%s\nafter the purge:\n%s",
			 before, after);
	cuprobe_after = cuprobe_paths();
	cr_assert_str_eq(cuprobe_after, cuprobe_before, "paths named cuprobe before:\n%s\nafter:\n%s",
			 cuprobe_before, cuprobe_after);
	free(paths);
	free(before);
	free(after);
	free(cuprobe_before);
	free(cuprobe_after);
}
