// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tools/deploy/: the systemd unit passes `systemd-analyze verify` with
 * nothing to say (no running systemd needed), the Kubernetes DaemonSet is
 * YAML that Debian's python3-yaml parses, and both start the exporter with
 * options its parser takes and the capabilities README names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "cli_options.h"
#include "helpers.h"

#define UNIT DEPLOY_DIR "/cuprobe-exporter.service"
#define DAEMONSET DEPLOY_DIR "/cuprobe-exporter-daemonset.yaml"
#define PYTHON3 "/usr/bin/python3"

static const char *const capabilities[] = { "BPF", "PERFMON", "SYS_ADMIN", "SYS_PTRACE",
					    "DAC_READ_SEARCH", "SYSLOG" };
#define CAPABILITIES (sizeof(capabilities) / sizeof(capabilities[0]))

/* The value of the first "key=" line of text (malloc'd), or NULL. */
static char *unit_value(const char *text, const char *key)
{
	size_t len = strlen(key);
	const char *line;

	for (line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (!strncmp(line, key, len) && line[len] == '=')
			return strndup(line + len + 1, strcspn(line + len + 1, "\n"));
	return NULL;
}

/* The exporter's options as the parser takes them: argv[0] is "exporter". */
static void expect_exporter_options(char **argv, int argc)
{
	union cp_options opts;
	char error[256] = "";

	cr_assert_geq(argc, 1);
	cr_assert_str_eq(argv[0], "exporter");
	cr_assert_eq(cp_options__parse(&cp_commands[CP_CMD_EXPORTER], argc, argv, &opts, error,
				       sizeof(error)),
		     CP_PARSE_OK, "cuprobe exporter would refuse its options: %s", error);
}

/* systemd-analyze verify on text (ExecStart pointed at the built cuprobe): its status and output. */
static int verify(const char *unit_text, char **output)
{
	char *dir = make_tmpdir(), *path = path_join(dir, "cuprobe-exporter.service"),
	     *out_path = path_join(dir, "out");
	char *argv[] = { "/usr/bin/systemd-analyze", "verify", "--man=no", path, NULL };
	struct run_opts opts = { .stdout_path = out_path, .stderr_path = out_path };
	int status;

	cr_assert(write_text(path, unit_text));
	status = run_program(argv, &opts, NULL);
	*output = read_text(out_path);
	remove_tree(dir);
	free(dir);
	free(path);
	free(out_path);
	return status;
}

/* The unit with its ExecStart's /usr/local/bin/cuprobe replaced by the built one, and extra after [Service]. */
static char *unit_for_here(const char *extra)
{
	char *text = read_text(UNIT), *out = NULL, *at, *service;

	cr_assert_not_null(text, "%s is missing", UNIT);
	at = strstr(text, "ExecStart=/usr/local/bin/cuprobe ");
	cr_assert_not_null(at, "ExecStart does not run /usr/local/bin/cuprobe (cmake --install's place)");
	service = strstr(text, "[Service]\n");
	cr_assert_not_null(service);
	cr_assert_lt(service, at);
	cr_assert(asprintf(&out, "%.*s%s%.*sExecStart=%s %s", (int)(service + 10 - text), text,
			   extra ? extra : "", (int)(at - (service + 10)), service + 10, CUPROBE_BIN,
			   at + strlen("ExecStart=/usr/local/bin/cuprobe ")) > 0);
	free(text);
	return out;
}

Test(systemd, the_unit_verifies_with_nothing_to_say)
{
	char *unit = unit_for_here(NULL), *output;
	int status = verify(unit, &output);

	cr_assert_eq(status, 0, "systemd-analyze verify: %s", output ? output : "");
	cr_assert(!output || !*output, "systemd-analyze verify had something to say:\n%s", output);
	free(output);
	free(unit);
}

/* The check has teeth: a misspelt key is reported (verify still exits 0 for it). */
Test(systemd, a_misspelt_key_would_be_reported)
{
	char *unit = unit_for_here("ProtectSystm=strict\n"), *output;

	verify(unit, &output);
	cr_assert_not_null(output);
	cr_assert_not_null(strstr(output, "ProtectSystm"), "not reported: %s", output);
	free(output);
	free(unit);
}

Test(systemd, the_unit_runs_the_exporter_with_the_capabilities_it_needs)
{
	char *text = read_text(UNIT), *exec, *caps, *argv[32], *save = NULL, *token;
	int argc = 0;
	size_t i;

	cr_assert_not_null(text);
	exec = unit_value(text, "ExecStart");
	cr_assert_not_null(exec);
	token = strtok_r(exec, " ", &save); /* the binary */
	while ((token = strtok_r(NULL, " ", &save)) && argc < 31)
		argv[argc++] = token;
	argv[argc] = NULL;
	expect_exporter_options(argv, argc);
	caps = unit_value(text, "CapabilityBoundingSet");
	cr_assert_not_null(caps, "no CapabilityBoundingSet: root would keep all it has");
	for (i = 0; i < CAPABILITIES; i++) {
		char name[32];

		snprintf(name, sizeof(name), "CAP_%s", capabilities[i]);
		cr_assert_not_null(strstr(caps, name), "CapabilityBoundingSet lacks %s", name);
	}
	cr_assert_eq(count_lines(caps), 1);
	{
		size_t words = 0;

		for (token = strtok_r(caps, " ", &save); token; token = strtok_r(NULL, " ", &save))
			words++;
		cr_assert_eq(words, CAPABILITIES, "capabilities beyond the ones it needs");
	}
	cr_assert_not_null(unit_value(text, "NoNewPrivileges"));
	cr_assert_str_eq(unit_value(text, "ProtectSystem"), "strict");
	free(exec);
	free(caps);
	free(text);
}

/*
 * Parsed by python3-yaml; prints the container's args one per line after
 * checking what a DaemonSet for the exporter must have.
 */
static const char daemonset_check[] =
	"import sys, yaml\n"
	"docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]\n"
	"assert len(docs) == 1, 'one document'\n"
	"ds = docs[0]\n"
	"assert ds['apiVersion'] == 'apps/v1' and ds['kind'] == 'DaemonSet', 'a DaemonSet'\n"
	"tpl = ds['spec']['template']\n"
	"assert ds['spec']['selector']['matchLabels'].items() <= tpl['metadata']['labels'].items(), 'selector'\n"
	"ann = tpl['metadata']['annotations']\n"
	"assert ann['prometheus.io/scrape'] == 'true' and ann['prometheus.io/port'] == '9466', 'annotations'\n"
	"spec = tpl['spec']\n"
	"assert spec['hostPID'] is True, 'hostPID'\n"
	"[c] = spec['containers']\n"
	"assert [p['containerPort'] for p in c['ports']] == [9466], 'port'\n"
	"sc = c['securityContext']\n"
	"assert sc['capabilities']['drop'] == ['ALL'], 'drop ALL'\n"
	"assert sorted(sc['capabilities']['add']) == sorted(sys.argv[2].split(',')), sc['capabilities']['add']\n"
	"assert sc.get('privileged') is False and sc['allowPrivilegeEscalation'] is False, 'not privileged'\n"
	"mounts = {m['mountPath']: m['name'] for m in c['volumeMounts']}\n"
	"volumes = {v['name']: v['hostPath']['path'] for v in spec['volumes']}\n"
	"assert mounts['/sys/kernel/tracing'] in volumes and volumes[mounts['/sys/kernel/tracing']] == '/sys/kernel/tracing'\n"
	"assert set(mounts.values()) <= set(volumes), 'every mount has its volume'\n"
	"print('\\n'.join(c['args']))\n";

Test(kubernetes, the_daemonset_parses_and_runs_the_exporter_as_root_with_six_capabilities)
{
	char *dir = make_tmpdir(), *out_path = path_join(dir, "out"), *err_path = path_join(dir, "err");
	char caps[256] = "", *args, *argv_args[32], *save = NULL, *token, *err;
	char *argv[] = { PYTHON3, "-c", (char *)daemonset_check, DAEMONSET, caps, NULL };
	struct run_opts opts = { .stdout_path = out_path, .stderr_path = err_path };
	int status, argc = 0;
	size_t i;

	for (i = 0; i < CAPABILITIES; i++)
		snprintf(caps + strlen(caps), sizeof(caps) - strlen(caps), "%s%s", i ? "," : "",
			 capabilities[i]);
	status = run_program(argv, &opts, NULL);
	err = read_text(err_path);
	cr_assert_eq(status, 0, "%s: %s (python3-yaml is Debian's python3-yaml)", DAEMONSET, err ? err : "");
	args = read_text(out_path);
	cr_assert_not_null(args);
	for (token = strtok_r(args, "\n", &save); token && argc < 31; token = strtok_r(NULL, "\n", &save))
		argv_args[argc++] = token;
	argv_args[argc] = NULL;
	expect_exporter_options(argv_args, argc);
	free(args);
	free(err);
	remove_tree(dir);
	free(dir);
	free(out_path);
	free(err_path);
}
