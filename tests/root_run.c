// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe run` end to end against the simulated driver: every example of
 * bpf/examples/ with exact numbers from the workload's own summary, the
 * targets (COMMAND, -p, system-wide), -i, --set, and every bad program the
 * runtime must refuse in one line with exit status 2 before anything runs.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <criterion/criterion.h>

#include "helpers.h"

/* An example of bpf/examples/, as a file of root's (see root_owned_copy). */
#define EXAMPLE(name) root_owned_copy(EXAMPLES_DIR "/" name)

struct run_result {
	char *dir;
	char *output;      /* -o FILE */
	int status;
	char *out_text;    /* cuprobe's stdout: COMMAND's summary line */
	char *err_text;
	json_t *lines;     /* the JSON lines of FILE (--json runs) */
};

/* `cuprobe run PROG --json -o FILE [extra...] -- drv_launch ARGS...` (workload NULL: no COMMAND). */
static void run_prog(struct run_result *r, const char *prog, const char *const *extra,
		     const char *const *workload, bool json)
{
	char *argv[64], *out_path, *err_path;
	struct run_opts opts = { 0 };
	int n = 0, i;

	require_root();
	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	r->output = path_join(r->dir, "output");
	out_path = path_join(r->dir, "stdout");
	err_path = path_join(r->dir, "stderr");
	argv[n++] = CUPROBE_BIN;
	argv[n++] = "run";
	argv[n++] = (char *)prog;
	if (json)
		argv[n++] = "--json";
	argv[n++] = "-o";
	argv[n++] = r->output;
	for (i = 0; extra && extra[i]; i++)
		argv[n++] = (char *)extra[i];
	if (workload) {
		argv[n++] = "--";
		argv[n++] = DRV_LAUNCH;
		for (i = 0; workload[i]; i++)
			argv[n++] = (char *)workload[i];
	}
	argv[n] = NULL;
	opts.stdout_path = out_path;
	opts.stderr_path = err_path;
	r->status = run_program(argv, &opts, NULL);
	r->out_text = read_text(out_path);
	r->err_text = read_text(err_path);
	if (json && r->status == 0)
		r->lines = load_json_lines(r->output);
	free(out_path);
	free(err_path);
}

/*
 * The same, started in the background with -v and returned once cuprobe
 * says its probes are live ("Ctrl-C stops"); finish_run waits for it.
 */
static pid_t start_run(struct run_result *r, const char *prog, const char *const *extra)
{
	char *argv[64], *err_path;
	struct run_opts opts = { 0 };
	pid_t pid;
	int n = 0, i;

	require_root();
	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	r->output = path_join(r->dir, "output");
	err_path = path_join(r->dir, "stderr");
	argv[n++] = CUPROBE_BIN;
	argv[n++] = "run";
	argv[n++] = (char *)prog;
	argv[n++] = "--json";
	argv[n++] = "-v";
	argv[n++] = "-o";
	argv[n++] = r->output;
	for (i = 0; extra && extra[i]; i++)
		argv[n++] = (char *)extra[i];
	argv[n] = NULL;
	opts.stderr_path = err_path;
	opts.stdout_path = "/dev/null";
	pid = spawn_program(argv, &opts);
	if (!wait_for_text(err_path, "Ctrl-C stops", 60)) {
		kill(pid, SIGKILL);
		wait_program(pid, 0);
		cr_assert_fail("cuprobe did not start: %s", read_text(err_path));
	}
	free(err_path);
	return pid;
}

static void finish_run(struct run_result *r, pid_t pid)
{
	char *err_path = path_join(r->dir, "stderr");

	r->status = wait_program(pid, 60);
	r->err_text = read_text(err_path);
	if (r->status == 0)
		r->lines = load_json_lines(r->output);
	free(err_path);
}

static void free_result(struct run_result *r)
{
	json_decref(r->lines);
	free(r->out_text);
	free(r->err_text);
	free(r->output);
	remove_tree(r->dir);
	free(r->dir);
}

/* key=VALUE of the nth drv_launch summary line. */
static long long workload_value(const struct run_result *r, int nth, const char *key)
{
	char *line = find_line(r->out_text, "drv_launch:", nth);
	long long value;

	cr_assert_not_null(line, "no drv_launch summary in: %s / %s", r->out_text, r->err_text);
	value = line_value(line, key);
	free(line);
	cr_assert_geq(value, 0, "no %s= on the summary line", key);
	return value;
}

/* The entries of the last (final) printing of the map called name. */
static json_t *final_map(const struct run_result *r, const char *name)
{
	json_t *found = NULL, *line;
	size_t i;

	cr_assert_not_null(r->lines, "no JSON output: %s", r->err_text);
	json_array_foreach(r->lines, i, line)
		if (!strcmp(jstr(line, "type"), "map") && !strcmp(jstr(line, "map"), name))
			found = json_object_get(line, "entries");
	cr_assert(json_is_array(found), "map %s not printed: %s", name, r->err_text);
	return found;
}

/* The value of the entry whose key member field is value (an integer), or NULL. */
static json_t *entry_where(json_t *entries, const char *field, long long value, const char *field2,
			   const char *value2)
{
	json_t *entry;
	size_t i;

	json_array_foreach(entries, i, entry) {
		json_t *key = json_object_get(entry, "key");

		if (jint(key, field) != value)
			continue;
		if (field2 && strcmp(jstr(key, field2), value2))
			continue;
		return json_object_get(entry, "value");
	}
	return NULL;
}

/* The count of a histogram, checked against the sum of its buckets. */
static long long hist_count(json_t *hist, long long *only_low, long long *only_high)
{
	json_t *buckets = json_object_get(hist, "buckets"), *bucket;
	long long sum = 0;
	size_t i;

	cr_assert(json_is_array(buckets));
	json_array_foreach(buckets, i, bucket)
		sum += jint(bucket, "count");
	cr_assert_eq(sum, jint(hist, "count"), "buckets do not sum to the count");
	if (only_low && json_array_size(buckets) == 1) {
		*only_low = jint(json_array_get(buckets, 0), "low");
		*only_high = jint(json_array_get(buckets, 0), "high");
	}
	return sum;
}

/* ---- maps of any size --------------------------------------------------------------- */

static char *write_program(const char *dir, const char *name, const char *source);

/*
 * An array of entries 512-byte values, of which cuda/launch writes one
 * (key 7). Written without the SDK so that it is compiled here, before
 * cuprobe runs: clang's memory would otherwise count in cuprobe's peak.
 */
static char *big_array_object(const char *dir, const char *name, unsigned int entries)
{
	char source[1024], file[64], *path, *object;
	char *cc[] = { BPF_CLANG, "-g", "-O2", "-target", "bpf", "-c", NULL, "-o", NULL, NULL };

	snprintf(source, sizeof(source),
		 "struct big { unsigned long long words[64]; };\n"
		 "struct { int (*type)[2]; int (*max_entries)[%u]; unsigned int *key; struct big *value; }\n"
		 "	big __attribute__((section(\".maps\"), used));\n"
		 "static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;\n"
		 "__attribute__((section(\"cuda/launch\"), used)) int mark(void *ctx)\n"
		 "{\n"
		 "	unsigned int key = 7;\n"
		 "	struct big *value = bpf_map_lookup_elem(&big, &key);\n"
		 "	if (value)\n"
		 "		value->words[0] = 42;\n"
		 "	return 0;\n"
		 "}\n"
		 "char LICENSE[] __attribute__((section(\"license\"), used)) = \"GPL\";\n",
		 entries);
	snprintf(file, sizeof(file), "%s.bpf.c", name);
	path = path_join(dir, file);
	snprintf(file, sizeof(file), "%s.bpf.o", name);
	object = path_join(dir, file);
	cr_assert(write_text(path, source));
	cc[6] = path;
	cc[8] = object;
	cr_assert_eq(run_program(cc, NULL, NULL), 0, "clang could not build the test object");
	free(path);
	return object;
}

/* `cuprobe run OBJECT [--json] -o FILE -- drv_launch 1`: its peak RSS in KiB; FILE's text. */
static long run_peak_kib(const char *object, bool json, char **output_text, char **err_text)
{
	char *dir = make_tmpdir(), *output = path_join(dir, "output"), *err = path_join(dir, "err");
	char *argv[] = { CUPROBE_BIN, "run", (char *)object, "-o", output, json ? "--json" : "-v",
			 "--", DRV_LAUNCH, "1", NULL };
	struct run_opts opts = { .stderr_path = err };
	struct rusage usage;
	int status;

	status = run_program_rusage(argv, &opts, &usage);
	*err_text = read_text(err);
	cr_assert_eq(status, 0, "status %d: %s", status, *err_text);
	*output_text = read_text(output);
	cr_assert_not_null(*output_text);
	remove_tree(dir);
	free(dir);
	free(output);
	free(err);
	return usage.ru_maxrss;
}

/*
 * Maps are read a batch at a time and printed as they are read: an array
 * ten times larger does not grow cuprobe (it read whole maps into memory,
 * and was OOM-killed on an array of 4,000,000 values of 4 KiB). Its
 * all-zero entries are not printed: one line for the one entry written.
 */
Test(maps, a_large_array_is_printed_in_bounded_memory, .timeout = 300)
{
	char *dir, *small, *large, *text, *err, *at, *entry;
	long small_kib, large_kib;
	json_t *line, *entries;
	json_error_t error;

	require_root();
	dir = make_tmpdir();
	small = big_array_object(dir, "small", 100000);
	large = big_array_object(dir, "large", 1000000);
	small_kib = run_peak_kib(small, true, &text, &err);
	free(text);
	free(err);
	large_kib = run_peak_kib(large, true, &text, &err);
	cr_log_info("peak RSS: %ld KiB with 100,000 entries, %ld KiB with 1,000,000", small_kib,
		    large_kib);
	cr_assert_leq(large_kib, small_kib + 16384,
		      "peak RSS %ld KiB with 1,000,000 entries of 512 bytes, %ld KiB with 100,000",
		      large_kib, small_kib);
	/* The map's line: its one written entry, nothing left out. */
	at = strstr(text, "{\"type\":\"map\",");
	cr_assert_not_null(at, "no map printed: %s", err);
	line = json_loadb(at, strcspn(at, "\n"), 0, &error);
	cr_assert_not_null(line, "bad JSON: %s", error.text);
	entries = json_object_get(line, "entries");
	cr_assert_eq(json_array_size(entries), 1, "%.300s", at);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(entries, 0), "key")), 7);
	cr_assert_eq(jint(line, "not_printed"), 0);
	json_decref(line);
	free(text);
	free(err);
	/* As text: the header, the map's name and one line. */
	run_peak_kib(large, false, &text, &err);
	cr_assert_eq(count_lines(text), 3, "%s", text);
	entry = find_line(text, "  7: ", 0);
	cr_assert_not_null(entry, "%s", text);
	cr_assert(strstr(entry, "42"), "%s", entry);
	free(entry);
	free(text);
	free(err);
	free(small);
	free(large);
	remove_tree(dir);
	free(dir);
}

static const char every_launch[] =
	"#include \"cuprobe.bpf.h\"\n"
	"struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4096); __type(key, __u32); __type(value, __u64); } slots SEC(\".maps\");\n"
	"__u32 next_slot;\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(one_slot_a_launch, struct cuda_launch, launch)\n"
	"{\n"
	"	__u32 key = next_slot++; /* drv_launch launches from one thread */\n"
	"	__u64 *value = bpf_map_lookup_elem(&slots, &key);\n"
	"	if (value)\n"
	"		*value = key + 1;\n"
	"	return 0;\n"
	"}\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

/* At most 1000 entries a map by default; the rest counted, in the map and on stderr. */
Test(maps, at_most_a_thousand_entries_printed_the_rest_counted, .timeout = 120)
{
	const char *const workload[] = { "1500", NULL };
	char *dir = make_tmpdir(), *prog = write_program(dir, "slots.bpf.c", every_launch);
	struct run_result r;
	json_t *line, *entries = NULL;
	size_t i;

	run_prog(&r, prog, NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	json_array_foreach(r.lines, i, line)
		if (!strcmp(jstr(line, "type"), "map")) {
			entries = json_object_get(line, "entries");
			cr_assert_eq(jint(line, "not_printed"), 500);
		}
	cr_assert_eq(json_array_size(entries), 1000);
	/* The array's order: keys 0 to 999, each the launch's number. */
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(entries, 999), "key")), 999);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(entries, 999), "value")), 1000);
	cr_assert(strstr(r.err_text, "cuprobe: 500 map entries not printed (at most 1000 a map: --max-entries 0 prints them all)"),
		  "%s", r.err_text);
	free_result(&r);
	/* --max-entries 0: all of them; N: N, the rest counted. */
	for (i = 0; i < 2; i++) {
		const char *const extra[] = { "--max-entries", i ? "10" : "0", NULL };
		json_t *map = NULL;
		size_t j;

		run_prog(&r, prog, extra, workload, true);
		cr_assert_eq(r.status, 0, "%s", r.err_text);
		json_array_foreach(r.lines, j, line)
			if (!strcmp(jstr(line, "type"), "map"))
				map = line;
		cr_assert_not_null(map);
		cr_assert_eq(json_array_size(json_object_get(map, "entries")), i ? 10 : 1500);
		cr_assert_eq(jint(map, "not_printed"), i ? 1490 : 0);
		cr_assert_eq(!!strstr(r.err_text, "map entries not printed"), i, "%s", r.err_text);
		free_result(&r);
	}
	free(prog);
	remove_tree(dir);
	free(dir);
}

static const char wide_slots[] =
	"#include \"cuprobe.bpf.h\"\n"
	"struct wide { __u64 a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p; };\n"
	"struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 16384); __type(key, __u32); __type(value, struct wide); } slots SEC(\".maps\");\n"
	"__u32 next_slot;\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(one_slot_a_launch, struct cuda_launch, launch)\n"
	"{\n"
	"	__u32 key = next_slot++;\n"
	"	struct wide *value = bpf_map_lookup_elem(&slots, &key);\n"
	"	if (value)\n"
	"		value->a = value->p = key + 1;\n"
	"	return 0;\n"
	"}\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

/*
 * A map is read a batch at a time (about 1 MiB: 7943 entries here) and
 * written a part at a time: 10,000 entries of about 120 bytes of JSON are a
 * first part that fits on a disk of 1100 KiB and an end that does not.
 * The disk full, the map is taken back whole: the file ends with the line
 * before it.
 */
Test(maps, a_map_cut_by_a_full_disk_is_taken_back_whole, .timeout = 120)
{
	char *dir = make_tmpdir(), *prog = write_program(dir, "wide.bpf.c", wide_slots);
	char *disk, *output, *err = path_join(dir, "err"), *text, *last;
	char *argv[] = { CUPROBE_BIN, "run", prog, "--json", "--max-entries", "0", "-o", NULL, "--",
			 DRV_LAUNCH, "10000", NULL };
	struct run_opts opts = { .stdout_path = "/dev/null", .stderr_path = err };
	size_t len;
	int status;

	require_root();
	disk = small_disk("1100k");
	output = path_join(disk, "out.json");
	argv[7] = output;
	status = run_program(argv, &opts, NULL);
	text = read_text(err);
	cr_assert_eq(status, 1, "status %d: %s", status, text);
	cr_assert(strstr(text, "No space left on device"), "%s", text);
	free(text);
	text = read_text(output);
	cr_assert_not_null(text);
	len = strlen(text);
	cr_assert(len && text[len - 1] == '\n', "ends inside a record: ...%s", text + (len > 80 ? len - 80 : 0));
	text[len - 1] = '\0';
	last = strrchr(text, '\n') ? strrchr(text, '\n') + 1 : text;
	cr_assert(!strncmp(last, "{\"type\":\"maps\",", 15), "the last line is not the maps' header: %.200s", last);
	free(text);
	free(output);
	small_disk_free(disk);
	free(err);
	free(prog);
	remove_tree(dir);
	free(dir);
}

/* ---- the examples ---------------------------------------------------------------- */

Test(examples, launch_dims_counts_every_launch_of_each_kernel, .timeout = 120)
{
	const char *const workload[] = { "1000", "2", NULL };
	struct run_result r;
	json_t *dims;
	long long low = 0, high = 0;

	run_prog(&r, EXAMPLE("launch_dims.bpf.c"), NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_assert(!strstr(r.err_text, "cuprobe_traced"), "CUDA_PROG filters: %s", r.err_text);
	dims = entry_where(final_map(&r, "launch_dims"), "pid", workload_value(&r, 0, "pid"),
			   "kernel", "vec_add");
	cr_assert_not_null(dims, "no entry for vec_add of the workload");
	cr_assert_eq(hist_count(json_object_get(dims, "blocks_per_grid"), &low, &high),
		     workload_value(&r, 0, "launches"));
	/* drv_launch: 1024 elements in blocks of 256 threads, 4 blocks. */
	cr_assert(low <= 4 && 4 <= high, "4 blocks not in [%lld, %lld]", low, high);
	cr_assert_eq(hist_count(json_object_get(dims, "threads_per_block"), &low, &high), 2000);
	cr_assert(low <= 256 && 256 <= high, "256 threads not in [%lld, %lld]", low, high);
	free_result(&r);
}

Test(examples, launch_dims_text_draws_the_histogram, .timeout = 120)
{
	const char *const workload[] = { "1000", NULL };
	struct run_result r;
	char *text;

	run_prog(&r, EXAMPLE("launch_dims.bpf.c"), NULL, workload, false);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	text = read_text(r.output);
	cr_assert_not_null(text);
	cr_assert(strstr(text, "kernel=\"vec_add\""), "kernel not named: %s", text);
	cr_assert(strstr(text, "blocks_per_grid: 1000 values"), "%s", text);
	cr_assert(strstr(text, "[3, 4]") && strstr(text, " 1000 |@@@@"), "no bar drawn: %s", text);
	free(text);
	free_result(&r);
}

/*
 * slow_syncs at min_us=0 on drv_launch 100 3 (pid): each launching thread's
 * cuStreamSynchronize and main's cuCtxSynchronize, each with its stack
 * named. Returns the records.
 */
static size_t check_sync_records(const struct run_result *r, long long pid)
{
	json_t *line;
	size_t i, records = 0, stream_syncs = 0, context_syncs = 0;

	cr_assert_eq(r->status, 0, "%s", r->err_text);
	json_array_foreach(r->lines, i, line) {
		json_t *record, *stack;
		const char *api, *want;
		bool named = false;
		size_t f;

		if (strcmp(jstr(line, "type"), "record"))
			continue;
		cr_assert_str_eq(jstr(line, "ring"), "slow_syncs");
		record = json_object_get(line, "record");
		cr_assert_eq(jint(record, "pid"), pid);
		cr_assert_eq(jint(record, "result"), 0);
		api = jstr(record, "api");
		/* Each launching thread syncs its stream; main syncs the context once. */
		if (!strcmp(api, "cuStreamSynchronize")) {
			stream_syncs++;
			want = "launch_thread+";
		} else {
			cr_assert_str_eq(api, "cuCtxSynchronize");
			context_syncs++;
			want = "main+";
		}
		stack = json_object_get(record, "stack");
		cr_assert(json_is_array(stack), "no stack");
		for (f = 0; f < json_array_size(stack); f++) {
			const char *frame = json_string_value(json_array_get(stack, f));

			named |= frame && strstr(frame, want) && strstr(frame, "drv_launch");
		}
		cr_assert(named, "the stack of %s does not name %s in drv_launch", api, want);
		records++;
	}
	cr_assert_eq(stream_syncs, 3);
	cr_assert_eq(context_syncs, 1);
	cr_assert(strstr(r->err_text, "ring slow_syncs: 4 records printed, 0 lost, 0 short"),
		  "%s", r->err_text);
	return records;
}

Test(examples, slow_syncs_records_every_sync_with_its_stack, .timeout = 120)
{
	const char *const extra[] = { "--set", "min_us=0", NULL };
	const char *const workload[] = { "100", "3", NULL };
	struct run_result r;
	size_t records;

	run_prog(&r, EXAMPLE("slow_syncs.bpf.c"), extra, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	records = check_sync_records(&r, workload_value(&r, 0, "pid"));
	cr_assert_eq((long long)records, workload_value(&r, 0, "syncs"));
	free_result(&r);
}

/*
 * A command that exits before cuprobe has read its records still has its
 * stacks named: it is held at cuInit until its memory map is read. cuprobe
 * stopped meanwhile makes the race certain: unheld, the command would run
 * to its end first. Its start delay leaves time to stop cuprobe before cuInit.
 */
Test(examples, stacks_named_of_a_command_done_before_cuprobe_reads_them, .timeout = 120)
{
	const char *const extra[] = { "--set", "min_us=0", "--", DRV_LAUNCH, "100", "3",
				      "--start-delay", "2000", NULL };
	struct run_result r;
	pid_t cuprobe, workload;
	char state = 0;
	int i;

	cuprobe = start_run(&r, EXAMPLE("slow_syncs.bpf.c"), extra);
	workload = child_named(cuprobe, "drv_launch", 10);
	cr_assert_gt(workload, 0, "the command did not start");
	cr_assert_eq(kill(cuprobe, SIGSTOP), 0);
	/* Held at cuInit ('T'); unheld, it ends ('Z': cuprobe cannot reap it now). */
	for (i = 0; i < 3000 && (state = process_state(workload)) != 'T' && state != 'Z'; i++)
		usleep(10000);
	cr_assert_eq(kill(cuprobe, SIGCONT), 0);
	cr_assert_eq(state, 'T', "the command was not held at cuInit (state '%c')", state ? state : '-');
	finish_run(&r, cuprobe);
	check_sync_records(&r, workload);
	free_result(&r);
}

Test(examples, slow_syncs_threshold_leaves_fast_syncs_out, .timeout = 120)
{
	/* The simulated driver's syncs return in microseconds: none blocks 10 s. */
	const char *const extra[] = { "--set", "min_us=10000000", NULL };
	const char *const workload[] = { "100", NULL };
	struct run_result r;

	run_prog(&r, EXAMPLE("slow_syncs.bpf.c"), extra, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_assert_eq(count_events(r.lines, "record", NULL), 0);
	cr_assert(strstr(r.err_text, "ring slow_syncs: 0 records printed, 0 lost, 0 short"),
		  "%s", r.err_text);
	free_result(&r);
}

Test(examples, alloc_sizes_per_process_and_kind, .timeout = 120)
{
	const char *const workload[] = { "10", "--leak", "65536", NULL };
	struct run_result r;
	json_t *entries, *device, *host;
	long long pid;

	run_prog(&r, EXAMPLE("alloc_sizes.bpf.c"), NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	pid = workload_value(&r, 0, "pid");
	entries = final_map(&r, "alloc_sizes");
	device = entry_where(entries, "pid", pid, "kind", "device");
	host = entry_where(entries, "pid", pid, "kind", "host");
	cr_assert_not_null(device);
	cr_assert_not_null(host);
	/* allocs= counts device allocations, the leak included; host_allocs the pinned ones. */
	cr_assert_eq(jint(device, "allocations"), workload_value(&r, 0, "allocs"));
	cr_assert_eq(jint(device, "bytes"), workload_value(&r, 0, "alloc_bytes"));
	cr_assert_eq(hist_count(json_object_get(device, "size"), NULL, NULL),
		     workload_value(&r, 0, "allocs"));
	cr_assert_eq(jint(host, "allocations"), workload_value(&r, 0, "host_allocs"));
	free_result(&r);
}

Test(examples, stream_launches_per_stream_add_up, .timeout = 120)
{
	const char *const workload[] = { "700", "3", NULL };
	struct run_result r;
	json_t *entries, *entry;
	uint64_t streams[8] = { 0 };
	long long per_stream[8] = { 0 }, pid, total;
	size_t i, s, stream_count = 0;

	run_prog(&r, EXAMPLE("stream_launches.bpf.c"), NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	pid = workload_value(&r, 0, "pid");
	entries = final_map(&r, "launches");
	json_array_foreach(entries, i, entry) {
		json_t *key = json_object_get(entry, "key");
		uint64_t stream = jhex(key, "stream");

		if (jint(key, "pid") != pid)
			continue;
		for (s = 0; s < stream_count && streams[s] != stream; s++)
			;
		cr_assert_lt(s, 8);
		if (s == stream_count)
			streams[stream_count++] = stream;
		per_stream[s] += json_integer_value(json_object_get(entry, "value"));
	}
	/*
	 * One stream per launching thread, each with all of its 700 launches; a
	 * thread's stream handle may be one another thread destroyed before (the
	 * driver reuses them), so a handle holds a multiple of 700.
	 */
	cr_assert_geq(stream_count, 1);
	for (s = 0, total = 0; s < stream_count; s++) {
		cr_assert_eq(per_stream[s] % 700, 0, "stream %zu: %lld launches", s, per_stream[s]);
		total += per_stream[s];
	}
	cr_assert_eq(total, 2100);
	free_result(&r);
}

Test(examples, copy_sizes_by_direction, .timeout = 120)
{
	const char *const workload[] = { "10", NULL };
	struct run_result r;
	json_t *entries, *entry;
	long long htod = 0, dtoh = 0, dtod = 0, bytes = 0;
	size_t i;

	run_prog(&r, EXAMPLE("copy_sizes.bpf.c"), NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	entries = final_map(&r, "copy_sizes");
	json_array_foreach(entries, i, entry) {
		json_t *key = json_object_get(entry, "key"), *value = json_object_get(entry, "value");
		const char *direction = jstr(key, "direction");

		cr_assert_eq(jint(key, "async"), 0);
		if (!strcmp(direction, "HtoD"))
			htod += jint(value, "copies");
		else if (!strcmp(direction, "DtoH"))
			dtoh += jint(value, "copies");
		else if (!strcmp(direction, "DtoD"))
			dtod += jint(value, "copies");
		else
			cr_assert_fail("unexpected direction %s", direction);
		bytes += jint(value, "bytes");
		cr_assert_eq(hist_count(json_object_get(value, "size"), NULL, NULL), jint(value, "copies"));
	}
	cr_assert_eq(htod, workload_value(&r, 0, "htod"));
	cr_assert_eq(dtoh, workload_value(&r, 0, "dtoh"));
	cr_assert_eq(dtod, workload_value(&r, 0, "dtod"));
	cr_assert_eq(bytes, workload_value(&r, 0, "copy_bytes"));
	free_result(&r);
}

/* ---- targets and timing ----------------------------------------------------------------- */

/* The launches of pid in launch_dims' final map. */
static long long launches_of(const struct run_result *r, long long pid)
{
	json_t *dims = entry_where(final_map(r, "launch_dims"), "pid", pid, "kernel", "vec_add");

	cr_assert_not_null(dims, "no entry for pid %lld: %s", pid, r->err_text);
	return hist_count(json_object_get(dims, "blocks_per_grid"), NULL, NULL);
}

Test(targets, system_wide_sees_a_process_started_after_it, .timeout = 120)
{
	char *argv[16], *out, *err, *work_out;
	struct run_opts opts = { 0 }, work_opts = { 0 };
	struct run_result r = { 0 };
	pid_t cuprobe;
	int n = 0;

	require_root();
	r.dir = make_tmpdir();
	r.output = path_join(r.dir, "output");
	out = path_join(r.dir, "stdout");
	err = path_join(r.dir, "stderr");
	work_out = path_join(r.dir, "workload");
	argv[n++] = CUPROBE_BIN;
	argv[n++] = "run";
	argv[n++] = (char *)EXAMPLE("launch_dims.bpf.c");
	argv[n++] = "--json";
	argv[n++] = "-o";
	argv[n++] = r.output;
	argv[n++] = "--lib";
	argv[n++] = CUDA_SIM_LIB;
	argv[n++] = "-v";
	argv[n] = NULL;
	opts.stdout_path = out;
	opts.stderr_path = err;
	cuprobe = spawn_program(argv, &opts);
	cr_assert(wait_for_text(err, "Ctrl-C stops", 60), "cuprobe did not start: %s", read_text(err));
	{
		char *workload[] = { DRV_LAUNCH, "300", NULL };

		work_opts.stdout_path = work_out;
		cr_assert_eq(run_program(workload, &work_opts, NULL), 0);
	}
	kill(cuprobe, SIGINT);
	r.status = wait_program(cuprobe, 30);
	/* System-wide, SIGINT is how tracing ends: no target was cut short, status 0. */
	cr_assert_eq(r.status, 0, "status %d", r.status);
	r.out_text = read_text(work_out);
	r.err_text = read_text(err);
	r.lines = load_json_lines(r.output);
	cr_assert_eq(launches_of(&r, workload_value(&r, 0, "pid")), 300);
	free(out);
	free(err);
	free(work_out);
	free_result(&r);
}

Test(targets, pid_target_counts_only_that_process, .timeout = 120)
{
	/* Time for cuprobe to compile, load and attach (a loaded CI machine) before cuInit. */
	char *workload[] = { DRV_LAUNCH, "400", "--start-delay", "5000", NULL };
	char *other[] = { DRV_LAUNCH, "50", NULL };
	char pid_text[16];
	const char *extra[] = { "-p", pid_text, "--lib", CUDA_SIM_LIB, NULL };
	struct run_opts work_opts = { 0 }, other_opts = { 0 };
	struct run_result r;
	char *dir = make_tmpdir(), *work_out, *other_out, *other_text, *line;
	pid_t target, cuprobe;

	work_out = path_join(dir, "target");
	other_out = path_join(dir, "other");
	work_opts.stdout_path = work_out;
	target = spawn_program(workload, &work_opts);
	snprintf(pid_text, sizeof(pid_text), "%d", target);
	cuprobe = start_run(&r, EXAMPLE("launch_dims.bpf.c"), extra);
	/* Another CUDA process, not a target, launching on the same driver file while the probes are live. */
	other_opts.stdout_path = other_out;
	cr_assert_eq(run_program(other, &other_opts, NULL), 0);
	other_text = read_text(other_out);
	line = find_line(other_text, "drv_launch:", 0);
	cr_assert(line && line_value(line, "launches") == 50, "the other process: %s", other_text);
	/* All of it inside the trace: cuprobe, which ends after its target, still runs. */
	cr_assert_eq(waitpid(cuprobe, NULL, WNOHANG), 0, "cuprobe ended before the other process ran");
	cr_assert_eq(wait_program(target, 30), 0);
	finish_run(&r, cuprobe);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	r.out_text = read_text(work_out);
	cr_assert_eq(launches_of(&r, target), 400);
	cr_assert_eq(json_array_size(final_map(&r, "launch_dims")), 1, "a process not targeted was counted");
	free(line);
	free(other_text);
	free(other_out);
	free(work_out);
	remove_tree(dir);
	free(dir);
	free_result(&r);
}

Test(targets, interval_prints_the_maps_while_running, .timeout = 120)
{
	const char *const extra[] = { "-i", "0.2", NULL };
	const char *const workload[] = { "300", "--start-delay", "900", NULL };
	struct run_result r;
	json_t *line;
	size_t i, headers = 0, finals = 0;

	run_prog(&r, EXAMPLE("launch_dims.bpf.c"), extra, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	json_array_foreach(r.lines, i, line) {
		if (strcmp(jstr(line, "type"), "maps"))
			continue;
		headers++;
		if (json_is_true(json_object_get(line, "final")))
			finals++;
	}
	cr_assert_geq(headers, 3, "only %zu printings in about a second at -i 0.2", headers);
	cr_assert_eq(finals, 1);
	cr_assert_eq(launches_of(&r, workload_value(&r, 0, "pid")), 300);
	free_result(&r);
}

/* ---- the return of a launch, kernel names, the filter outside the macros ------------- */

static char *write_program(const char *dir, const char *name, const char *source);

static const char launch_returns[] =
	"#include \"cuprobe.bpf.h\"\n"
	"struct ret_key { __u32 pid; __s32 result; };\n"
	"struct ret_value { __u64 returns, blocks, threads, with_function, with_stream, timed; };\n"
	"struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64); __type(key, struct ret_key); __type(value, struct ret_value); } launch_returns SEC(\".maps\");\n"
	"SEC(\"cuda.return/launch\")\n"
	"int CUDA_RETURN_PROG(after_launch, struct cuda_launch, launch)\n"
	"{\n"
	"	struct ret_key k = { .pid = bpf_get_current_pid_tgid() >> 32, .result = launch->result };\n"
	"	struct ret_value *v = cuprobe_lookup_or_init(launch_returns, &k);\n"
	"	if (!v)\n"
	"		return 0;\n"
	"	__sync_fetch_and_add(&v->returns, 1);\n"
	"	__sync_fetch_and_add(&v->blocks, (__u64)launch->grid[0] * launch->grid[1] * launch->grid[2]);\n"
	"	__sync_fetch_and_add(&v->threads, (__u64)launch->block[0] * launch->block[1] * launch->block[2]);\n"
	"	if (launch->function)\n"
	"		__sync_fetch_and_add(&v->with_function, 1);\n"
	"	if (launch->stream)\n"
	"		__sync_fetch_and_add(&v->with_stream, 1);\n"
	"	if (launch->duration_ns)\n"
	"		__sync_fetch_and_add(&v->timed, 1);\n"
	"	return 0;\n"
	"}\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

/* cuda.return/launch on cuLaunchKernel (extra NULL) or cuLaunchKernelEx: the arguments kept from the entry. */
static void check_launch_returns(const char *variant)
{
	const char *const workload[] = { "300", "2", variant, NULL };
	struct run_result r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "returns.bpf.c", launch_returns);
	json_t *entries, *value;
	long long launches;

	run_prog(&r, prog, NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	launches = workload_value(&r, 0, "launches");
	cr_assert_eq(launches, 600);
	entries = final_map(&r, "launch_returns");
	/* Every launch returned CUDA_SUCCESS: one entry, for the workload, result 0. */
	cr_assert_eq(json_array_size(entries), 1, "%s", json_dumps(entries, 0));
	value = entry_where(entries, "pid", workload_value(&r, 0, "pid"), NULL, NULL);
	cr_assert_not_null(value);
	cr_assert_eq(jint(json_object_get(json_array_get(entries, 0), "key"), "result"), 0);
	cr_assert_eq(jint(value, "returns"), launches);
	/* drv_launch: 4 blocks of 256 threads, on each thread's own stream. */
	cr_assert_eq(jint(value, "blocks"), 4 * launches);
	cr_assert_eq(jint(value, "threads"), 256 * launches);
	cr_assert_eq(jint(value, "with_function"), launches);
	cr_assert_eq(jint(value, "with_stream"), launches);
	cr_assert_eq(jint(value, "timed"), launches);
	free(prog);
	remove_tree(dir);
	free(dir);
	free_result(&r);
}

Test(returns, launch_return_sees_the_result_and_the_arguments, .timeout = 120)
{
	check_launch_returns(NULL);
}

Test(returns, launch_ex_return_sees_the_arguments_of_its_config, .timeout = 120)
{
	check_launch_returns("--ex");
}

/* Launches counted by what cuprobe_kernel_name() said: 1 vec_add, 2 another name, 0 none. */
static const char kernel_names[] =
	"#include \"cuprobe.bpf.h\"\n"
	"struct name_key { __u32 pid; __u32 named; };\n"
	"struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64); __type(key, struct name_key); __type(value, __u64); } by_name SEC(\".maps\");\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(count_by_name, struct cuda_launch, launch)\n"
	"{\n"
	"	const char want[8] = \"vec_add\";\n"
	"	struct name_key k = { .pid = bpf_get_current_pid_tgid() >> 32 };\n"
	"	const char *name = cuprobe_kernel_name(k.pid, launch->function);\n"
	"	__u64 *count;\n"
	"	int i;\n"
	"	if (name) {\n"
	"		k.named = 1;\n"
	"		for (i = 0; i < 8; i++)\n"
	"			if (name[i] != want[i])\n"
	"				k.named = 2;\n"
	"	}\n"
	"	count = cuprobe_lookup_or_init(by_name, &k);\n"
	"	if (count)\n"
	"		__sync_fetch_and_add(count, 1);\n"
	"	return 0;\n"
	"}\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

/* The count of by_name's entry (pid, named), 0 when absent. */
static long long by_name(const struct run_result *r, long long pid, int named)
{
	json_t *entry;
	size_t i;

	json_array_foreach(final_map(r, "by_name"), i, entry) {
		json_t *key = json_object_get(entry, "key");

		if (jint(key, "pid") == pid && jint(key, "named") == named)
			return json_integer_value(json_object_get(entry, "value"));
	}
	return 0;
}

Test(kernel_names, a_program_reads_the_name_the_naming_probe_learned, .timeout = 120)
{
	const char *const workload[] = { "500", NULL };
	struct run_result r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "names.bpf.c", kernel_names);
	long long pid;

	run_prog(&r, prog, NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	pid = workload_value(&r, 0, "pid");
	cr_assert_eq(by_name(&r, pid, 1), 500, "launches named vec_add: %s", r.err_text);
	cr_assert_eq(by_name(&r, pid, 0), 0);
	cr_assert_eq(by_name(&r, pid, 2), 0);
	free(prog);
	remove_tree(dir);
	free(dir);
	free_result(&r);
}

/*
 * A process attached with -p after its cuModuleGetFunction: the naming
 * probe never saw the name, the runtime reads it from the driver's record
 * when the program first asks and writes it into the map, so the launches
 * after that one are named.
 */
Test(kernel_names, a_process_attached_late_is_named_from_the_drivers_record, .timeout = 120)
{
	char *target_argv[] = { DRV_LAUNCH, "100000000", NULL };
	char pid_text[16];
	const char *extra[] = { "-p", pid_text, "-d", "2", NULL };
	struct run_result r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "names.bpf.c", kernel_names);
	long long named, unnamed;
	pid_t target, cuprobe;
	int status;

	target = start_background(target_argv);
	usleep(300000); /* past cuModuleGetFunction: launching */
	snprintf(pid_text, sizeof(pid_text), "%d", target);
	cuprobe = start_run(&r, prog, extra);
	finish_run(&r, cuprobe);
	kill(target, SIGKILL);
	waitpid(target, &status, 0);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	named = by_name(&r, target, 1);
	unnamed = by_name(&r, target, 0);
	cr_assert_gt(named, 0, "no launch named vec_add (%lld unnamed): %s", unnamed, r.err_text);
	cr_assert_eq(by_name(&r, target, 2), 0);
	/* Unnamed: only the launches before the runtime's answer. */
	cr_assert_gt(named, unnamed, "%lld named, %lld unnamed", named, unnamed);
	free(prog);
	remove_tree(dir);
	free(dir);
	free_result(&r);
}

static const char unfiltered[] =
	"#include \"cuprobe.bpf.h\"\n"
	"__u64 launches;\n"
	"SEC(\"cuda/launch\")\n"
	"int raw_launch(struct pt_regs *ctx)\n"
	"{\n"
	"	__sync_fetch_and_add(&launches, 1);\n"
	"	return 0;\n"
	"}\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

Test(targets, a_program_without_the_filter_is_warned_about, .timeout = 120)
{
	const char *const workload[] = { "10", NULL };
	struct run_result r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "raw.bpf.c", unfiltered);

	run_prog(&r, prog, NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_assert(strstr(r.err_text, "program raw_launch does not check cuprobe_traced(): it sees every process"),
		  "%s", r.err_text);
	cr_assert_null(strstr(strstr(r.err_text, "program raw_launch") + 1, "program raw_launch"),
		       "said more than once: %s", r.err_text);
	free(prog);
	remove_tree(dir);
	free(dir);
	free_result(&r);
}

/* ---- records lost and short, maps cuprobe cannot print --------------------------------- */

static char *write_program(const char *dir, const char *name, const char *source)
{
	char *path = path_join(dir, name);

	cr_assert(write_text(path, source));
	chmod(dir, 0755);
	chmod(path, 0644);
	return path;
}

static const char short_records[] =
	"#include \"cuprobe.bpf.h\"\n"
	"struct big { __u64 a, b, c, d; };\n"
	"CUPROBE_RING(events, struct big, 16384);\n"
	"struct { __uint(type, BPF_MAP_TYPE_QUEUE); __uint(max_entries, 16); __type(value, __u64); } queue SEC(\".maps\");\n"
	"struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 16); __uint(key_size, 4); __uint(value_size, 8); } untyped SEC(\".maps\");\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(half_records, struct cuda_launch, launch)\n"
	"{\n"
	"	__u64 half[2] = { 1, 2 };\n"
	"	__u32 key = 7;\n"
	"	__u64 value = 9;\n"
	"	bpf_ringbuf_output(&events, half, sizeof(half), 0);\n"
	"	bpf_map_update_elem(&untyped, &key, &value, BPF_ANY);\n"
	"	return 0;\n"
	"}\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

Test(rings, short_records_counted_and_unreadable_maps_named, .timeout = 120)
{
	const char *const workload[] = { "25", NULL };
	struct run_result r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "short.bpf.c", short_records), *text;

	run_prog(&r, prog, NULL, workload, false);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_assert(strstr(r.err_text, "ring events: 0 records printed, 0 lost, 25 short"), "%s",
		  r.err_text);
	cr_assert(strstr(r.err_text, "25 records of ring events shorter than their type (32 bytes)"),
		  "%s", r.err_text);
	text = read_text(r.output);
	cr_assert(strstr(text, "queue (queue): not printed"), "%s", text);
	/* No BTF types for its key and value: the bytes in hex. */
	cr_assert(strstr(text, "07000000: 0900000000000000"), "%s", text);
	free(text);
	free(prog);
	remove_tree(dir);
	free(dir);
	free_result(&r);
}

static const char lossy[] =
	"#include \"cuprobe.bpf.h\"\n"
	"struct fat { __u64 launch; __u8 filler[1800]; };\n"
	"CUPROBE_RING(fat, struct fat, 4096);\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(fat_records, struct cuda_launch, launch)\n"
	"{\n"
	"	struct fat *record = cuprobe_ring_reserve(fat);\n"
	"	if (record) {\n"
	"		record->launch = 1;\n"
	"		cuprobe_ring_submit(record);\n"
	"	}\n"
	"	return 0;\n"
	"}\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

Test(rings, every_record_is_printed_or_counted_lost, .timeout = 120)
{
	const char *const workload[] = { "3000", NULL };
	struct run_result r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "lossy.bpf.c", lossy), *line;
	unsigned long long printed = 0, lost = 0;

	run_prog(&r, prog, NULL, workload, true);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	line = strstr(r.err_text, "ring fat: ");
	cr_assert_not_null(line, "%s", r.err_text);
	cr_assert_eq(sscanf(line, "ring fat: %llu records printed, %llu lost", &printed, &lost), 2);
	/* Two records fit in the ring: 3000 launches overflow it. */
	cr_assert_gt(lost, 0, "%s", r.err_text);
	cr_assert_eq(printed + lost, 3000);
	cr_assert_eq(count_events(r.lines, "record", NULL), printed);
	free(prog);
	remove_tree(dir);
	free(dir);
	free_result(&r);
}

/* ---- bad programs: one line, exit 2, nothing run or written ---------------------------- */

struct refusal {
	int status;
	char *err;
	bool command_ran;
	bool output_touched;
};

/* ---- what a refused run leaves in the kernel: nothing --------------------------------- */

/* The id after id of the BPF programs (or links); 0 when there is none. */
static __u32 next_bpf_id(bool links, __u32 id)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.start_id = id;
	if (syscall(__NR_bpf, links ? BPF_LINK_GET_NEXT_ID : BPF_PROG_GET_NEXT_ID, &attr, sizeof(attr)))
		return 0;
	return attr.next_id;
}

static __u32 newest_bpf_id(bool links)
{
	__u32 id = 0, next;

	while ((next = next_bpf_id(links, id)))
		id = next;
	return id;
}

/* Marks in held (indexed by id - base, below max) the ids some process has open (its fdinfo says). */
static void mark_held(bool links, __u32 base, bool *held, size_t max)
{
	const char *field = links ? "link_id:" : "prog_id:";
	DIR *proc = opendir("/proc"), *fds;
	struct dirent *pid, *fd;
	char path[600];

	cr_assert_not_null(proc);
	while ((pid = readdir(proc))) {
		if (pid->d_name[0] < '1' || pid->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fdinfo", pid->d_name);
		fds = opendir(path);
		if (!fds)
			continue; /* exited meanwhile */
		while ((fd = readdir(fds))) {
			char *text, *at;

			if (fd->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/%s/fdinfo/%s", pid->d_name, fd->d_name);
			text = read_text(path);
			for (at = text; at && (at = strstr(at, field)); at += strlen(field)) {
				unsigned long id = strtoul(at + strlen(field), NULL, 10);

				if (id > base && id - base <= max)
					held[id - base - 1] = true;
			}
			free(text);
		}
		closedir(fds);
	}
	closedir(proc);
}

/*
 * No program or link made after base is left that no process holds: the
 * run's own are gone once it has exited (those of other runs at the same
 * time are held by them). The kernel frees them after a grace period,
 * which for uprobe programs (RCU tasks trace) took over 3 s once on a
 * loaded 2-core CI machine: waited for up to 15 s.
 */
static void assert_none_left(__u32 prog_base, __u32 link_base)
{
	enum { MAX = 4096 };
	static bool held[MAX];
	__u32 left = 0, id;
	bool links = false;
	int tries, kind;

	for (tries = 0; tries < 1500; tries++) {
		left = 0;
		for (kind = 0; kind < 2 && !left; kind++) {
			__u32 base = kind ? link_base : prog_base;

			links = kind;
			memset(held, 0, sizeof(held));
			mark_held(links, base, held, MAX);
			for (id = next_bpf_id(links, base); id && !left; id = next_bpf_id(links, id))
				if (id - base > MAX || !held[id - base - 1])
					left = id;
		}
		if (!left)
			return;
		usleep(10000);
	}
	cr_assert_fail("BPF %s %u of the refused run is left in the kernel", links ? "link" : "program",
		       left);
}

/* Runs cuprobe run PROG on a COMMAND that would leave a mark, with -o on an existing file. */
static void refuse(struct refusal *out, const char *prog, const char *const *extra,
		   const char *const *launcher)
{
	char *dir = make_tmpdir(), *mark = path_join(dir, "ran"), *output = path_join(dir, "kept");
	char *err_path = path_join(dir, "stderr"), *argv[32], script[512], *text;
	struct run_opts opts = { .stderr_path = err_path };
	__u32 prog_base, link_base;
	int n = 0, i;

	require_root();
	cr_assert(write_text(output, "old contents\n"));
	snprintf(script, sizeof(script), "/usr/bin/touch %s", mark);
	for (i = 0; launcher && launcher[i]; i++)
		argv[n++] = (char *)launcher[i];
	argv[n++] = CUPROBE_BIN;
	argv[n++] = "run";
	argv[n++] = (char *)prog;
	argv[n++] = "-o";
	argv[n++] = output;
	for (i = 0; extra && extra[i]; i++)
		argv[n++] = (char *)extra[i];
	argv[n++] = "--";
	argv[n++] = "/bin/sh";
	argv[n++] = "-c";
	argv[n++] = script;
	argv[n] = NULL;
	prog_base = newest_bpf_id(false);
	link_base = newest_bpf_id(true);
	out->status = run_program(argv, &opts, NULL);
	assert_none_left(prog_base, link_base);
	out->err = read_text(err_path);
	out->command_ran = !access(mark, F_OK);
	text = read_text(output);
	out->output_touched = !text || strcmp(text, "old contents\n");
	free(text);
	remove_tree(dir);
	free(dir);
	free(mark);
	free(output);
	free(err_path);
}

static void assert_refused(const struct refusal *r, int status, const char *message)
{
	cr_assert_eq(r->status, status, "status %d: %s", r->status, r->err);
	cr_assert(strstr(r->err, message), "expected \"%s\" in: %s", message, r->err);
	cr_assert(!r->command_ran, "COMMAND ran");
	cr_assert(!r->output_touched, "-o FILE was touched");
}

Test(bad_programs, not_an_elf_file)
{
	struct refusal r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "text.bpf.o", "hello\n");

	refuse(&r, prog, NULL, NULL);
	assert_refused(&r, 2, "text.bpf.o: not an ELF file");
	/* One line. */
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
	remove_tree(dir);
}

Test(bad_programs, an_elf_file_that_is_not_bpf)
{
	struct refusal r;

	refuse(&r, "/bin/true", NULL, NULL);
	assert_refused(&r, 2, "/bin/true: not a BPF object");
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
}

Test(bad_programs, a_missing_file)
{
	struct refusal r;

	refuse(&r, "/nonexistent/prog.bpf.o", NULL, NULL);
	assert_refused(&r, 2, "/nonexistent/prog.bpf.o: no such file");
}

Test(bad_programs, no_cuda_programs)
{
	struct refusal r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "plain.bpf.c",
		"#include \"cuprobe.bpf.h\"\n"
		"SEC(\"uprobe\") int plain(void *ctx) { return 0; }\n"
		"char LICENSE[] SEC(\"license\") = \"GPL\";\n");

	refuse(&r, prog, NULL, NULL);
	assert_refused(&r, 2, "no CUDA programs: put them in SEC(\"cuda/FAMILY\")");
	remove_tree(dir);
}

Test(bad_programs, an_unknown_section_lists_the_valid_ones)
{
	struct refusal r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "typo.bpf.c",
		"#include \"cuprobe.bpf.h\"\n"
		"SEC(\"cuda/launches\") int typo(void *ctx) { return 0; }\n"
		"char LICENSE[] SEC(\"license\") = \"GPL\";\n");

	refuse(&r, prog, NULL, NULL);
	assert_refused(&r, 2, "program typo: unknown section \"cuda/launches\"; valid: cuda/launch, ");
	cr_assert(strstr(r.err, "cuda.return/sync") && strstr(r.err, "cuda/context"), "%s", r.err);
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
	remove_tree(dir);
}

static const char unchecked[] =
	"#include \"cuprobe.bpf.h\"\n"
	"struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4); __type(key, __u32); __type(value, __u64); } m SEC(\".maps\");\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(unchecked, struct cuda_launch, launch)\n"
	"{\n"
	"	__u32 k = 0;\n"
	"	__u64 *v = bpf_map_lookup_elem(&m, &k);\n"
	"	return *v;\n"
	"}\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

Test(bad_programs, the_verifier_refuses_and_v_shows_its_log, .timeout = 60)
{
	const char *const verbose[] = { "-v", NULL };
	struct refusal r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "unchecked.bpf.c", unchecked), *first;

	refuse(&r, prog, NULL, NULL);
	assert_refused(&r, 2, "unchecked.bpf.c: the kernel's verifier refused it");
	/* One line says it: without -v, no log follows. */
	first = strndup(r.err, strcspn(r.err, "\n"));
	cr_assert(first && strstr(first, "unchecked.bpf.c: the kernel's verifier refused it"), "%s", r.err);
	free(first);
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
	cr_assert(!strstr(r.err, "invalid mem access"), "the log without -v: %s", r.err);
	refuse(&r, prog, verbose, NULL);
	assert_refused(&r, 2, "the kernel's verifier refused it");
	cr_assert(strstr(r.err, "invalid mem access 'map_value_or_null'"), "%s", r.err);
	remove_tree(dir);
}

Test(bad_programs, a_map_named_like_the_runtimes_is_refused)
{
	struct refusal r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "prefix.bpf.c",
		"#include \"cuprobe.bpf.h\"\n"
		"struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4); __type(key, __u32); __type(value, __u64); } cuprobe_mine SEC(\".maps\");\n"
		"SEC(\"cuda/launch\")\n"
		"int CUDA_PROG(prefixed, struct cuda_launch, launch)\n"
		"{\n"
		"	__u32 k = 0;\n"
		"	__u64 one = 1;\n"
		"	bpf_map_update_elem(&cuprobe_mine, &k, &one, BPF_ANY);\n"
		"	return 0;\n"
		"}\n"
		"char LICENSE[] SEC(\"license\") = \"GPL\";\n");

	refuse(&r, prog, NULL, NULL);
	assert_refused(&r, 2, "prefix.bpf.c: map cuprobe_mine: names cuprobe_* are the runtime's maps");
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
	remove_tree(dir);
}

Test(bad_programs, a_compile_error_is_clangs_to_say)
{
	struct refusal r;
	char *dir = make_tmpdir(), *prog = write_program(dir, "broken.bpf.c", "int broken( {\n");

	refuse(&r, prog, NULL, NULL);
	assert_refused(&r, 2, "broken.bpf.c: clang failed (exit status 1)");
	cr_assert(strstr(r.err, "error"), "clang's own message: %s", r.err);
	remove_tree(dir);
}

Test(bad_programs, no_btf_without_g)
{
	char *dir = make_tmpdir(), *source = write_program(dir, "nobtf.bpf.c",
		"__attribute__((section(\"cuda/launch\"), used)) int nobtf(void *ctx) { return 0; }\n"
		"__attribute__((section(\"license\"), used)) char LICENSE[] = \"GPL\";\n");
	char *object = path_join(dir, "nobtf.bpf.o");
	char *cc[] = { BPF_CLANG, "-O2", "-target", "bpf", "-c", source, "-o", object, NULL };
	struct refusal r;

	cr_assert_eq(run_program(cc, NULL, NULL), 0, "clang could not build the test object");
	refuse(&r, object, NULL, NULL);
	assert_refused(&r, 2, "nobtf.bpf.o: no BTF (compile with -g)");
	remove_tree(dir);
}

/* libbpf needs BTF for a .maps section and said "No such file or directory". */
Test(bad_programs, no_btf_with_a_map)
{
	char *dir = make_tmpdir(), *source = write_program(dir, "nobtfmap.bpf.c",
		"struct { int (*type)[2]; int (*max_entries)[4]; int *key; long *value; }\n"
		"	counts __attribute__((section(\".maps\"), used));\n"
		"__attribute__((section(\"cuda/launch\"), used)) int nobtf(void *ctx) { return 0; }\n"
		"__attribute__((section(\"license\"), used)) char LICENSE[] = \"GPL\";\n");
	char *object = path_join(dir, "nobtfmap.bpf.o");
	char *cc[] = { BPF_CLANG, "-O2", "-target", "bpf", "-c", source, "-o", object, NULL };
	struct refusal r;

	cr_assert_eq(run_program(cc, NULL, NULL), 0, "clang could not build the test object");
	refuse(&r, object, NULL, NULL);
	assert_refused(&r, 2, "nobtfmap.bpf.o: no BTF (compile with -g)");
	cr_assert(!strstr(r.err, "No such file"), "%s", r.err);
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
	free(r.err);
	free(source);
	free(object);
	remove_tree(dir);
	free(dir);
}

/* ---- programs root loads: changed by nobody but root and the invoking user ---------- */

static const char noop[] =
	"#include \"cuprobe.bpf.h\"\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(noop, struct cuda_launch, launch) { return 0; }\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

/* `cuprobe run PROG -- /bin/true` with env (NULL-terminated, may be NULL): its status and stderr. */
static int run_noop(const char *prog, char **env, char **err_text)
{
	char *dir = make_tmpdir(), *err = path_join(dir, "err");
	char *argv[] = { CUPROBE_BIN, "run", (char *)prog, "--", "/bin/true", NULL };
	struct run_opts opts = { .stdout_path = "/dev/null", .stderr_path = err, .extra_env = env };
	int status = run_program(argv, &opts, NULL);

	*err_text = read_text(err);
	remove_tree(dir);
	free(dir);
	free(err);
	return status;
}

/*
 * A program root would load that someone other than root and the invoking
 * user can change (the file, or a directory on its way from /) is refused
 * before it is compiled or loaded, as sudo and ssh refuse such files.
 */
Test(untrusted_programs, a_program_others_can_change_is_refused, .timeout = 120)
{
	static const struct {
		const char *name;
		mode_t file_mode, dir_mode;
		uid_t owner;
		gid_t group;
		const char *message;
	} cases[] = {
		{ "o+w.bpf.c", 0666, 0700, 0, 0, "o+w.bpf.c: is writable by others (mode 0666)" },
		{ "g+w.bpf.c", 0664, 0700, 0, 1234, "g+w.bpf.c: is writable by group 1234 (mode 0664)" },
		{ "owned.bpf.c", 0644, 0700, 1234, 0, "owned.bpf.c: is owned by uid 1234" },
		{ "dir.bpf.c", 0644, 0777, 0, 0, "dir.bpf.c: its directory " },
		{ "object.bpf.o", 0646, 0700, 0, 0, "object.bpf.o: is writable by others (mode 0646)" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *dir = make_tmpdir(), *sub = path_join(dir, "programs"), *prog;
		struct refusal r;

		cr_assert_eq(mkdir(sub, 0700), 0);
		prog = strstr(cases[i].name, ".bpf.o") ? big_array_object(sub, "object", 4) :
			write_program(sub, cases[i].name, noop);
		cr_assert_eq(chown(prog, cases[i].owner, cases[i].group), 0);
		cr_assert_eq(chmod(prog, cases[i].file_mode), 0);
		cr_assert_eq(chmod(sub, cases[i].dir_mode), 0);
		refuse(&r, prog, NULL, NULL);
		assert_refused(&r, 2, cases[i].message);
		cr_assert(strstr(r.err, "cuprobe loads as root only files that nobody but root and the invoking user can change"),
			  "%s", r.err);
		if (cases[i].dir_mode == 0777)
			cr_assert(strstr(r.err, "is writable by others (mode 0777, not sticky)"), "%s", r.err);
		cr_assert_eq(count_lines(r.err), 1, "one line: %s", r.err);
		free(r.err);
		free(prog);
		free(sub);
		remove_tree(dir);
		free(dir);
	}
}

/* What stays allowed: group 0's write, a sticky directory (/tmp), the invoking user's own file. */
Test(untrusted_programs, root_and_the_invoking_user_may_write_it, .timeout = 120)
{
	char *sudo[] = { "SUDO_UID=1234", "SUDO_GID=1234", NULL };
	char *dir = make_tmpdir(), *sticky = path_join(dir, "sticky"), *err, *prog;
	int status;

	require_root();
	cr_assert_eq(chmod(dir, 0755), 0);
	cr_assert_eq(mkdir(sticky, 0755), 0);
	cr_assert_eq(chmod(sticky, 01777), 0);
	prog = write_program(sticky, "group0.bpf.c", noop);
	cr_assert_eq(chmod(prog, 0664), 0);
	status = run_noop(prog, NULL, &err);
	cr_assert_eq(status, 0, "root's group, in a sticky directory: exit %d: %s", status, err);
	free(err);
	/* Under sudo: the user's own file, and a file of root's. */
	cr_assert_eq(chown(prog, 1234, 1234), 0);
	cr_assert_eq(chmod(prog, 0664), 0);
	status = run_noop(prog, sudo, &err);
	cr_assert_eq(status, 0, "the invoking user's own file: exit %d: %s", status, err);
	free(err);
	status = run_noop(prog, NULL, &err);
	cr_assert_eq(status, 2, "another user's file, run by root: exit %d: %s", status, err);
	cr_assert(strstr(err, "is owned by uid 1234"), "%s", err);
	free(err);
	free(prog);
	free(sticky);
	remove_tree(dir);
	free(dir);
}

/*
 * --run-as-root runs COMMAND as root, nothing more: PROG is still compiled
 * as the invoking user, who cannot read a source only root can.
 */
Test(untrusted_programs, run_as_root_still_compiles_as_the_invoking_user, .timeout = 120)
{
	char *sudo[] = { "SUDO_UID=1234", "SUDO_GID=1234", NULL };
	char *dir = make_tmpdir(), *err_path = path_join(dir, "err"), *err, *prog;
	char *argv[] = { CUPROBE_BIN, "run", NULL, "--run-as-root", "--", "/bin/true", NULL };
	struct run_opts opts = { .stdout_path = "/dev/null", .stderr_path = err_path,
				 .extra_env = sudo };
	int status;

	require_root();
	cr_assert_eq(chmod(dir, 0755), 0);
	prog = write_program(dir, "secret.bpf.c", noop);
	cr_assert_eq(chmod(prog, 0600), 0);
	argv[2] = prog;
	status = run_program(argv, &opts, NULL);
	err = read_text(err_path);
	cr_assert_eq(status, 2, "compiled as root: exit %d: %s", status, err);
	cr_assert(strstr(err, "secret.bpf.c: clang failed"), "%s", err);
	free(err);
	free(prog);
	free(err_path);
	remove_tree(dir);
	free(dir);
}

Test(bad_programs, set_names_an_unknown_variable_or_a_bad_value)
{
	const char *const unknown[] = { "--set", "threshold=5", NULL };
	const char *const negative[] = { "--set", "min_us=-1", NULL };
	const char *const junk[] = { "--set", "min_us=12abc", NULL };
	struct refusal r;

	refuse(&r, EXAMPLE("slow_syncs.bpf.c"), unknown, NULL);
	assert_refused(&r, 2, "--set threshold=5: no const volatile integer threshold; settable: min_us");
	refuse(&r, EXAMPLE("slow_syncs.bpf.c"), negative, NULL);
	assert_refused(&r, 2, "--set min_us=-1: not an unsigned integer of 8 bytes");
	refuse(&r, EXAMPLE("slow_syncs.bpf.c"), junk, NULL);
	assert_refused(&r, 2, "--set min_us=12abc: not an unsigned integer");
}

Test(bad_programs, no_clang_is_one_clear_error)
{
	const char *const no_path[] = { "/usr/bin/env", "PATH=/nonexistent", NULL };
	struct refusal r;

	refuse(&r, EXAMPLE("launch_dims.bpf.c"), NULL, no_path);
	assert_refused(&r, 1, "cannot compile it: clang is not installed");
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
}

Test(bad_programs, no_prog_is_a_usage_error)
{
	char *argv[] = { CUPROBE_BIN, "run", "--json", NULL };
	char *dir = make_tmpdir(), *err = path_join(dir, "err"), *text;
	struct run_opts opts = { .stderr_path = err };

	cr_assert_eq(run_program(argv, &opts, NULL), 2);
	text = read_text(err);
	cr_assert(strstr(text, "no PROG"), "%s", text);
	free(text);
	remove_tree(dir);
}
