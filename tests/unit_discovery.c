// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Discovery: /proc/PID/maps lines, library names, the deduplicated library set. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cuprobe_internal.h"
#include "helpers.h"

Test(maps_parse, line_with_a_path)
{
	char line[] = "7f2c1a200000-7f2c1a222000 r-xp 00028000 fd:01 1311234"
		      "                    /usr/lib/x86_64-linux-gnu/libcuda.so.1\n";
	struct cp_maps_entry e;

	cr_assert_eq(cp_maps__parse_line(line, &e), 0);
	cr_assert_eq(e.start, 0x7f2c1a200000ull);
	cr_assert_eq(e.end, 0x7f2c1a222000ull);
	cr_assert_str_eq(e.perms, "r-xp");
	cr_assert_eq(e.offset, 0x28000);
	cr_assert_eq(e.dev_major, 0xfd);
	cr_assert_eq(e.dev_minor, 1);
	cr_assert_eq(e.inode, 1311234);
	cr_assert_str_eq(e.path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
}

Test(maps_parse, anonymous_line_without_a_path)
{
	char line[] = "7f9e85c23000-7f9e85c45000 rw-p 00000000 00:00 0 \n";
	char bare[] = "7f9e85c23000-7f9e85c45000 rw-p 00000000 00:00 0";
	struct cp_maps_entry e;

	cr_assert_eq(cp_maps__parse_line(line, &e), 0);
	cr_assert_str_eq(e.path, "");
	cr_assert_eq(e.inode, 0);
	cr_assert_eq(e.end - e.start, 0x22000);
	cr_assert_eq(cp_maps__parse_line(bare, &e), 0);
	cr_assert_str_eq(e.path, "");
	cr_assert_str_eq(e.perms, "rw-p");
}

Test(maps_parse, heap_pseudo_path)
{
	char line[] = "55d76549e000-55d7654e0000 rw-p 00000000 00:00 0                          [heap]\n";
	struct cp_maps_entry e;

	cr_assert_eq(cp_maps__parse_line(line, &e), 0);
	cr_assert_str_eq(e.path, "[heap]");
	cr_assert_eq(e.start, 0x55d76549e000ull);
}

Test(maps_parse, path_with_spaces_and_deleted_suffix)
{
	char spaces[] = "7f0000000000-7f0000001000 r--p 00001000 08:02 77 /opt/my cuda/lib dir/libcuda.so.1\n";
	char deleted[] = "7f0000000000-7f0000001000 r-xp 00000000 08:02 78 /usr/lib/libcuda.so.1 (deleted)\n";
	struct cp_maps_entry e;

	cr_assert_eq(cp_maps__parse_line(spaces, &e), 0);
	cr_assert_str_eq(e.path, "/opt/my cuda/lib dir/libcuda.so.1");
	cr_assert_eq(e.offset, 0x1000);
	cr_assert_eq(e.dev_major, 8);
	cr_assert_eq(e.dev_minor, 2);
	cr_assert_eq(cp_maps__parse_line(deleted, &e), 0);
	cr_assert_str_eq(e.path, "/usr/lib/libcuda.so.1 (deleted)");
	cr_assert_eq(e.inode, 78);
}

Test(maps_parse, every_line_of_our_own_maps)
{
	char *text = read_text("/proc/self/maps"), *line, *save = NULL;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int lines = 0, exe_lines = 0;

	cr_assert_not_null(text);
	cr_assert(n > 0);
	exe[n] = '\0';
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct cp_maps_entry e;

		cr_assert_eq(cp_maps__parse_line(line, &e), 0, "rejected: %s", line);
		cr_assert_lt(e.start, e.end);
		if (!strcmp(e.path, exe))
			exe_lines++;
		lines++;
	}
	cr_assert_gt(lines, 5);
	cr_assert_gt(exe_lines, 0, "our executable %s not found in the parsed paths", exe);
	free(text);
}

Test(maps_parse, malformed_lines_rejected)
{
	const char *bad[] = {
		"",
		"\n",
		"garbage",
		"7f00-",
		"7f00-7f10",
		"7f00-7f10 r-xp",
		"7f00-7f10 r-xp 0 fd:01",
		"zzzz-7f10 r-xp 00000000 fd:01 5 /lib/x.so",
		"7f00-7f10 r-p 00000000 fd:01 5 /lib/x.so",     /* 3-letter perms */
		"7f10-7f00 r-xp 00000000 fd:01 5 /lib/x.so",    /* end before start */
		"7f00-7f10 r-xp 00000000 fd-01 5 /lib/x.so",    /* bad device */
	};
	struct cp_maps_entry e;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *copy = strdup(bad[i]);

		cr_assert_eq(cp_maps__parse_line(copy, &e), -EINVAL, "accepted: \"%s\"", bad[i]);
		free(copy);
	}
	cr_assert_eq(cp_maps__parse_line(NULL, &e), -EINVAL);
}

Test(library_name, matches_soname_and_versions_only)
{
	cr_assert(cp_path__is_library("/x/libcuda.so.1", "libcuda.so.1"));
	cr_assert(cp_path__is_library("libcuda.so.1", "libcuda.so.1"));
	cr_assert(cp_path__is_library("/x/libcuda.so.1.2", "libcuda.so"));
	cr_assert(cp_path__is_library("/usr/lib/libcuda.so.535.104.05", "libcuda.so"));
	cr_assert(cp_path__is_library("/x/libcuda.so", "libcuda.so"));
	cr_assert_not(cp_path__is_library("/x/libcudart.so.13", "libcuda.so"));
	cr_assert_not(cp_path__is_library("/x/mylibcuda.so.1", "libcuda.so.1"));
	/* Maps show the file the libcuda.so.1 symlink resolved to (seen on the H200). */
	cr_assert(cp_path__is_library("/usr/local/nvidia/lib64/libcuda.so.580.159.04", "libcuda.so.1"));
	cr_assert(cp_path__is_library("/x/libcudart.so.13.0.96", "libcudart.so.13"));
	cr_assert_not(cp_path__is_library("/x/libcudadebugger.so.1", "libcuda.so.1"));
	cr_assert_not(cp_path__is_library("/x/libcuda.sox", "libcuda.so.1"));
	cr_assert_not(cp_path__is_library("/libcuda.so.1/other.so", "libcuda.so.1"));
	cr_assert_not(cp_path__is_library("/x/libcuda.so.1", ""));
	cr_assert_not(cp_path__is_library(NULL, "libcuda.so.1"));
}

Test(lib_set, dedupes_by_inode_across_symlinks_and_hard_links)
{
	char *dir = make_tmpdir();
	char *real = path_join(dir, "libcuda.so.1"), *sym = path_join(dir, "link.so.1");
	char *hard = path_join(dir, "hard.so.1"), *other = path_join(dir, "other.so.1");
	struct cp_lib_set *set = cp_lib_set__new();

	cr_assert_not_null(set);
	cr_assert(write_text(real, "not really ELF"));
	cr_assert(write_text(other, "another file"));
	cr_assert_eq(symlink(real, sym), 0);
	cr_assert_eq(link(real, hard), 0);

	cr_assert_eq(cp_lib_set__add(set, real), 1);
	cr_assert_eq(cp_lib_set__add(set, sym), 0, "a symlink to a known file was added again");
	cr_assert_eq(cp_lib_set__add(set, hard), 0, "a hard link to a known file was added again");
	cr_assert_eq(cp_lib_set__add(set, real), 0);
	cr_assert_eq(cp_lib_set__count(set), 1);
	cr_assert_str_eq(cp_lib_set__path(set, 0), real);
	cr_assert_eq(cp_lib_set__add(set, other), 1);
	cr_assert_eq(cp_lib_set__count(set), 2);
	cr_assert_str_eq(cp_lib_set__path(set, 1), other);
	cr_assert_null(cp_lib_set__path(set, 2));

	cp_lib_set__free(set);
	remove_tree(dir);
	free(real); free(sym); free(hard); free(other); free(dir);
}

Test(lib_set, symlink_first_then_the_real_path)
{
	char *dir = make_tmpdir();
	char *real = path_join(dir, "libcuda.so.1"), *sym = path_join(dir, "libcuda.so");
	struct cp_lib_set *set = cp_lib_set__new();

	cr_assert(write_text(real, "x"));
	cr_assert_eq(symlink("libcuda.so.1", sym), 0); /* relative, like the real ones */
	cr_assert_eq(cp_lib_set__add(set, sym), 1);
	cr_assert_eq(cp_lib_set__add(set, real), 0);
	cr_assert_eq(cp_lib_set__count(set), 1);
	cp_lib_set__free(set);
	remove_tree(dir);
	free(real); free(sym); free(dir);
}

Test(lib_set, rejects_what_is_not_a_regular_file)
{
	char *dir = make_tmpdir();
	char *fifo = path_join(dir, "fifo"), *missing = path_join(dir, "missing.so");
	char *dangling = path_join(dir, "dangling.so");
	struct cp_lib_set *set = cp_lib_set__new();

	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(symlink(missing, dangling), 0);
	cr_assert_eq(cp_lib_set__add(set, dir), -EINVAL, "a directory was accepted");
	cr_assert_eq(cp_lib_set__add(set, "/dev/null"), -EINVAL, "a character device was accepted");
	cr_assert_eq(cp_lib_set__add(set, fifo), -EINVAL, "a FIFO was accepted");
	cr_assert_eq(cp_lib_set__add(set, missing), -ENOENT);
	cr_assert_eq(cp_lib_set__add(set, dangling), -ENOENT);
	cr_assert_eq(cp_lib_set__add(set, ""), -EINVAL);
	cr_assert_eq(cp_lib_set__count(set), 0);
	cp_lib_set__free(set);
	remove_tree(dir);
	free(fifo); free(missing); free(dangling); free(dir);
}

Test(discover, finds_the_simulated_driver_through_a_runpath)
{
	/* drv_launch's RUNPATH is $ORIGIN/../lib/cuda-sim: for_exec must expand it. */
	struct cp_lib_set *set = cp_lib_set__new();
	struct stat want, got;
	size_t i;
	bool found = false;

	cr_assert_eq(stat(CUDA_SIM_LIB, &want), 0, "%s not built", CUDA_SIM_LIB);
	cr_assert_geq(cp_discover__for_exec(set, "libcuda.so.1", DRV_LAUNCH, NULL), 1);
	for (i = 0; i < cp_lib_set__count(set); i++)
		if (!stat(cp_lib_set__path(set, i), &got) && got.st_ino == want.st_ino &&
		    got.st_dev == want.st_dev)
			found = true;
	cr_assert(found, "the simulated driver was not found through drv_launch's RUNPATH");
	cp_lib_set__free(set);
}

Test(discover, ld_library_path_entries_are_searched)
{
	char *dir = make_tmpdir(), *lib = path_join(dir, "libfake_cuprobe.so.3");
	char search[4200];
	struct cp_lib_set *set = cp_lib_set__new();

	cr_assert(write_text(lib, "x"));
	snprintf(search, sizeof(search), "/nonexistent-dir:%s", dir);
	cr_assert_eq(cp_discover__for_exec(set, "libfake_cuprobe.so.3", NULL, search), 1);
	cr_assert_eq(cp_lib_set__count(set), 1);
	cp_lib_set__free(set);
	remove_tree(dir);
	free(lib); free(dir);
}

Test(discover, process_that_is_gone)
{
	struct cp_lib_set *set = cp_lib_set__new();
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	waitpid(pid, &status, 0);
	cr_assert_eq(cp_discover__process(set, pid, "libcuda.so.1"), -ESRCH);
	/* Our own process maps libc, through /proc/PID/root. */
	cr_assert_geq(cp_discover__process(set, getpid(), "libc.so.6"), 1);
	cr_assert_not_null(strstr(cp_lib_set__path(set, 0), "/root/"));
	cp_lib_set__free(set);
}
