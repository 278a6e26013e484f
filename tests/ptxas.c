// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"
#include "ptxas.h"

void require_ptxas(void)
{
	if (!PTXAS_BIN[0] || access(PTXAS_BIN, X_OK))
		cr_skip_test("no ptxas (CUDA toolkit) on this machine: the PTX is not judged");
}

const char *ptxas_oldest_arch(void)
{
	static char arch[16];
	char *dir, *out, *help, *argv[] = { PTXAS_BIN, "--help", NULL };
	struct run_opts opts = { 0 };

	if (arch[0])
		return arch;
	dir = make_tmpdir();
	out = path_join(dir, "help");
	opts.stdout_path = out;
	run_program(argv, &opts, NULL);
	help = read_text(out);
	snprintf(arch, sizeof(arch), "%s", help && strstr(help, "'sm_70'") ? "sm_70" : "sm_75");
	free(help);
	free(out);
	remove_tree(dir);
	free(dir);
	return arch;
}

void assert_ptxas_accepts(const char *module, const char *arch, const char *what)
{
	char *dir = make_tmpdir(), *source = path_join(dir, "module.ptx");
	char *object = path_join(dir, "module.cubin"), *err = path_join(dir, "stderr"), *text;
	char arch_flag[32];
	char *argv[] = { PTXAS_BIN, arch_flag, source, "-o", object, NULL };
	struct run_opts opts = { .stderr_path = err, .stdout_path = err };
	int status;

	snprintf(arch_flag, sizeof(arch_flag), "-arch=%s", arch);
	cr_assert(write_text(source, module));
	status = run_program(argv, &opts, NULL);
	text = read_text(err);
	cr_assert_eq(status, 0, "ptxas -arch=%s refused %s: %s\n---\n%s", arch, what,
		     text ? text : "", module);
	free(text);
	remove_tree(dir);
	free(dir);
	free(source);
	free(object);
	free(err);
}
