// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * NCCL end to end, as root, with the real cuprobe, the simulated NCCL and
 * the simulated driver (nccl_loop says what it called):
 *  - trace: every operation's calls and bytes exactly, the communicators
 *    (rank, size, NCCL's commId hash), ncclBcast counted once though it is
 *    made through ncclBroadcast, every kernel and copy linked to the
 *    collective (or the group) that made it and each call's launch and copy
 *    counts right, the calls that left nothing on the GPU (one rank, in
 *    place) counted as such, the Perfetto trace's collective slices over
 *    their kernels;
 *  - stats: the same per communicator and op, the API table's probe hits,
 *    and with --timeline every kernel's bound attributed;
 *  - a late attach (-p): exact from the attach on, the kernels looked up
 *    before it named from the driver's records, the communicator learned
 *    from the queries the program makes;
 *  - cuprobe run with the nccl family (bpf/examples/nccl_bytes.bpf.c);
 *  - the exporter: calls and bytes per op and GPU, on /metrics.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cuprobe.h"
#include "helpers.h"
#include "prom.h"

#define MAX_OPS 32

struct op_count {
	char op[32];
	long long calls, bytes, launches, copies, no_gpu_work;
};

struct run {
	char *dir;
	char *events;
	char *perfetto;
	char *out;
	char *err;
	char *out_text;
	char *err_text;
	json_t *json;
	int status;
	struct op_count ops[MAX_OPS];
	size_t op_count;
	char *summary;
};

static void run_init(struct run *r)
{
	require_root();
	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	r->events = path_join(r->dir, "events.json");
	r->perfetto = path_join(r->dir, "perfetto.json");
	r->out = path_join(r->dir, "stdout.txt");
	r->err = path_join(r->dir, "stderr.txt");
}

static void run_free(struct run *r)
{
	if (r->json)
		json_decref(r->json);
	remove_tree(r->dir);
	free(r->dir);
	free(r->events);
	free(r->perfetto);
	free(r->out);
	free(r->err);
	free(r->out_text);
	free(r->err_text);
	free(r->summary);
}

/* The workload's "nccl_loop: op=NAME calls=N bytes=B launches=L copies=C no_gpu_work=I" lines, and its summary. */
static void read_workload(struct run *r)
{
	const char *at = r->out_text;

	while ((at = strstr(at, "nccl_loop: op="))) {
		struct op_count *o = &r->ops[r->op_count];

		cr_assert_lt(r->op_count, MAX_OPS);
		cr_assert_eq(sscanf(at, "nccl_loop: op=%31s calls=%lld bytes=%lld launches=%lld copies=%lld "
				    "no_gpu_work=%lld", o->op, &o->calls, &o->bytes, &o->launches,
				    &o->copies, &o->no_gpu_work), 6, "%.80s", at);
		r->op_count++;
		at++;
	}
	r->summary = find_line(r->out_text, "nccl_loop: pid=", 0);
	cr_assert_not_null(r->summary, "nccl_loop printed no summary:\n%s\n%s", r->out_text,
			   r->err_text);
	cr_assert(strstr(r->summary, "result=ok"), "%s", r->summary);
	cr_assert_gt(r->op_count, 10, "only %zu operations", r->op_count);
}

static void run_cuprobe(struct run *r, char **argv)
{
	struct run_opts o = { .stdout_path = r->out, .stderr_path = r->err };

	argv[0] = CUPROBE_BIN;
	r->status = run_program(argv, &o, NULL);
	r->out_text = read_text(r->out);
	r->err_text = read_text(r->err);
	cr_assert_not_null(r->out_text);
	cr_assert_not_null(r->err_text);
	cr_assert_eq(r->status, 0, "cuprobe exited %d; stderr:\n%s", r->status, r->err_text);
	read_workload(r);
}

/* "api=NAME calls=N" of the workload: calls of that export it made itself. */
static long long api_calls(const struct run *r, const char *api)
{
	char needle[96];
	const char *at;

	snprintf(needle, sizeof(needle), "nccl_loop: api=%s calls=", api);
	at = strstr(r->out_text, needle);
	return at ? atoll(at + strlen(needle)) : 0;
}

static bool nccl_of(json_t *ev, long long pid)
{
	return !strcmp(jstr(ev, "type"), "nccl") && jint(ev, "pid") == pid;
}

/* A collective out of any group that launched and copied nothing: its record says so by both counts. */
static bool no_gpu_work(json_t *ev)
{
	return json_object_get(ev, "bytes") && !jint(ev, "group") && !jint(ev, "launches") &&
	       !jint(ev, "copies") && !jint(ev, "result");
}

/*
 * Per operation: the records' calls, bytes, launches, copies and calls that
 * left nothing on the GPU are the workload's, and no record of an
 * operation it did not make.
 */
static void check_ops(struct run *r, long long pid)
{
	size_t i, j;
	json_t *ev;

	for (i = 0; i < r->op_count; i++) {
		long long calls = 0, bytes = 0, launches = 0, copies = 0, idle = 0;

		json_array_foreach(r->json, j, ev) {
			if (!nccl_of(ev, pid) || strcmp(jstr(ev, "op"), r->ops[i].op))
				continue;
			calls++;
			launches += jint(ev, "launches");
			copies += jint(ev, "copies");
			idle += no_gpu_work(ev);
			if (json_object_get(ev, "bytes"))
				bytes += jint(ev, "bytes");
			cr_assert_eq(jint(ev, "result"), 0, "%s failed", r->ops[i].op);
		}
		cr_assert_eq(calls, r->ops[i].calls, "%s: %lld calls, cuprobe saw %lld", r->ops[i].op,
			     r->ops[i].calls, calls);
		cr_assert_eq(bytes, r->ops[i].bytes, "%s: %lld bytes, cuprobe saw %lld", r->ops[i].op,
			     r->ops[i].bytes, bytes);
		cr_assert_eq(launches, r->ops[i].launches, "%s: %lld launches, cuprobe linked %lld",
			     r->ops[i].op, r->ops[i].launches, launches);
		cr_assert_eq(copies, r->ops[i].copies, "%s: %lld copies, cuprobe linked %lld",
			     r->ops[i].op, r->ops[i].copies, copies);
		cr_assert_eq(idle, r->ops[i].no_gpu_work, "%s: %lld calls with no GPU work, cuprobe %lld",
			     r->ops[i].op, r->ops[i].no_gpu_work, idle);
	}
	json_array_foreach(r->json, j, ev) {
		bool known = false;

		if (!nccl_of(ev, pid))
			continue;
		for (i = 0; i < r->op_count; i++)
			known |= !strcmp(jstr(ev, "op"), r->ops[i].op);
		cr_assert(known, "a record of %s, which nccl_loop did not count", jstr(ev, "op"));
	}
}

/* The NCCL call of pid whose seq is link; fails the test when none. */
static json_t *nccl_call_of(struct run *r, long long pid, long long link)
{
	json_t *owner;
	size_t j;

	json_array_foreach(r->json, j, owner)
		if (nccl_of(owner, pid) && jint(owner, "seq") == link)
			return owner;
	cr_assert_fail("no NCCL call has seq %lld", link);
	return NULL;
}

/* Records of type of pid that carry nccl_call link. */
static long long linked_to(struct run *r, long long pid, const char *type, long long link)
{
	long long count = 0;
	json_t *ev;
	size_t j;

	json_array_foreach(r->json, j, ev)
		if (!strcmp(jstr(ev, "type"), type) && jint(ev, "pid") == pid &&
		    json_object_get(ev, "nccl_call") && jint(ev, "nccl_call") == link)
			count++;
	return count;
}

/*
 * Every launch of the workload is NCCL's, linked to the call whose seq it
 * carries (a collective, or a group's ncclGroupStart), and so is every
 * copy it made inside a collective (nccl_loop makes none of its own while
 * one is in flight); each call's launch and copy counts are the records
 * that name it.
 */
static void check_links(struct run *r, long long pid)
{
	size_t i, linked = 0;
	json_t *ev, *owner;

	json_array_foreach(r->json, i, ev) {
		long long link;

		if (strcmp(jstr(ev, "type"), "launch") || jint(ev, "pid") != pid)
			continue;
		cr_assert(json_object_get(ev, "nccl_call"), "a launch of %s linked to no NCCL call",
			  jstr(ev, "kernel"));
		link = jint(ev, "nccl_call");
		cr_assert(!strncmp(jstr(ev, "kernel"), "ncclDevKernel_", 14) ||
			  strstr(jstr(ev, "kernel"), "oneRankReduce"), "%s", jstr(ev, "kernel"));
		owner = nccl_call_of(r, pid, link);
		/* A collective's own kernel is named after it (one rank's: oneRankReduce); a group's is Generic or SendRecv. */
		if (!strcmp(jstr(owner, "op"), "group_start"))
			cr_assert(strstr(jstr(ev, "kernel"), "Generic") ||
				  strstr(jstr(ev, "kernel"), "SendRecv"), "%s", jstr(ev, "kernel"));
		else
			cr_assert(json_object_get(owner, "stream") &&
				  !strcmp(jstr(owner, "stream"), jstr(ev, "stream")),
				  "a collective's kernel on another stream");
		linked++;
	}
	cr_assert_eq((long long)linked, line_value(r->summary, "launches"));
	/* Copies: each inside a collective, on its stream. */
	linked = 0;
	json_array_foreach(r->json, i, ev) {
		if (strcmp(jstr(ev, "type"), "copy") || jint(ev, "pid") != pid ||
		    !json_object_get(ev, "nccl_call"))
			continue;
		owner = nccl_call_of(r, pid, jint(ev, "nccl_call"));
		cr_assert(json_object_get(owner, "bytes"), "a copy inside %s", jstr(owner, "op"));
		cr_assert_str_eq(jstr(owner, "stream"), jstr(ev, "stream"), "a collective's copy on another stream");
		cr_assert_eq(jint(ev, "bytes"), jint(owner, "bytes"), "%s copied another size", jstr(owner, "op"));
		linked++;
	}
	cr_assert_eq((long long)linked, line_value(r->summary, "copies"));
	/* The other way: each call's counts are what links to it. */
	json_array_foreach(r->json, i, owner) {
		long long link;

		if (!nccl_of(owner, pid) || (!jint(owner, "launches") && !jint(owner, "copies")))
			continue;
		link = !strcmp(jstr(owner, "op"), "group_end") ? jint(owner, "group") : jint(owner, "seq");
		cr_assert(strcmp(jstr(owner, "op"), "group_end") ||
			  json_is_true(json_object_get(owner, "outermost")), "an inner group end launched");
		cr_assert_eq(linked_to(r, pid, "launch", link), jint(owner, "launches"), "%s seq %lld",
			     jstr(owner, "op"), jint(owner, "seq"));
		cr_assert_eq(linked_to(r, pid, "copy", link), jint(owner, "copies"), "%s seq %lld",
			     jstr(owner, "op"), jint(owner, "seq"));
	}
}

/* The communicators: the first as ncclCommInitRank made it, those of ncclCommInitAll by rank. */
static void check_comms(struct run *r, long long pid, int ranks)
{
	long long seen[8] = { 0 };
	size_t i;
	json_t *ev;
	char comm[32], id[32];

	snprintf(comm, sizeof(comm), "0x%llx", strtoull(strstr(r->summary, " comm=") + 6, NULL, 16));
	snprintf(id, sizeof(id), "0x%llx", strtoull(strstr(r->summary, " comm_id=") + 9, NULL, 16));
	json_array_foreach(r->json, i, ev) {
		if (!nccl_of(ev, pid) || !json_object_get(ev, "bytes"))
			continue;
		if (!strcmp(jstr(ev, "comm"), comm)) {
			cr_assert_str_eq(jstr(ev, "comm_id"), id, "the commId hash NCCL would print");
			cr_assert_eq(jint(ev, "rank"), 0);
			cr_assert_eq(jint(ev, "nranks"), 1);
			cr_assert_eq(jint(ev, "device"), 0);
		} else if (jint(ev, "nranks") == ranks) {
			cr_assert_lt(jint(ev, "rank"), ranks);
			seen[jint(ev, "rank")]++;
		} else {
			/* The split's child: its rank and size depend on every rank's colour. */
			cr_assert_eq(jint(ev, "nranks"), -1, "comm %s", jstr(ev, "comm"));
			cr_assert_str_eq(jstr(ev, "op"), "all_reduce");
		}
	}
	for (i = 0; ranks && i < (size_t)ranks; i++)
		cr_assert_gt(seen[i], 0, "no call of rank %zu of the %d", i, ranks);
}

Test(trace, every_operation_counted_linked_and_drawn_exactly, .timeout = 120)
{
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--perfetto", NULL, "--",
			 NCCL_LOOP, "3", "--ranks", "3", "--kernel-us", "20", NULL };
	json_t *perfetto, *ev;
	long long pid, slices = 0, owners = 0;
	size_t i;
	struct run r;

	run_init(&r);
	argv[4] = r.events;
	argv[6] = r.perfetto;
	run_cuprobe(&r, argv);
	r.json = load_json_lines(r.events);
	pid = line_value(r.summary, "pid");
	check_ops(&r, pid);
	check_links(&r, pid);
	check_comms(&r, pid, 3);
	/* ncclBcast is one call, though NCCL (and the simulator) makes it through ncclBroadcast. */
	cr_assert_eq(count_events(r.json, "nccl", "ncclBcast"), api_calls(&r, "ncclBcast"));
	cr_assert_eq(count_events(r.json, "nccl", "ncclBroadcast"), api_calls(&r, "ncclBroadcast"));

	/* Perfetto: a slice per call (or group) that launched, over its kernels, all bounded. */
	json_array_foreach(r.json, i, ev)
		if (nccl_of(ev, pid) && jint(ev, "launches") &&
		    (strcmp(jstr(ev, "op"), "group_end") || json_is_true(json_object_get(ev, "outermost"))))
			owners++;
	perfetto = json_load_file(r.perfetto, 0, NULL);
	cr_assert(json_is_array(perfetto), "the Perfetto trace is not a JSON array");
	json_array_foreach(perfetto, i, ev) {
		json_t *args;

		if (strcmp(jstr(ev, "ph"), "b") || !json_object_get(ev, "cat") ||
		    strcmp(jstr(ev, "cat"), "nccl"))
			continue;
		args = json_object_get(ev, "args");
		cr_assert_eq(jint(args, "kernels"), jint(args, "launches"));
		cr_assert_eq(jint(args, "kernels_bounded"), jint(args, "launches"));
		slices++;
	}
	cr_assert_eq(slices, owners, "%lld collective slices for %lld calls that launched", slices,
		     owners);
	json_decref(perfetto);
	run_free(&r);
}

/* The stats report's "nccl" rows of one op, summed over communicators. */
static void stats_op(json_t *stats, const char *op, long long *calls, long long *bytes,
		     long long *launches, long long *kernels, long long *copies, long long *idle)
{
	json_t *row;
	size_t i;

	*calls = *bytes = *launches = *kernels = *copies = *idle = 0;
	json_array_foreach(json_object_get(stats, "nccl"), i, row) {
		if (strcmp(jstr(row, "op"), op))
			continue;
		*calls += jint(row, "calls");
		*bytes += jint(row, "bytes");
		*launches += jint(row, "launches");
		*kernels += jint(row, "kernels");
		*copies += jint(row, "copies");
		*idle += jint(row, "no_gpu_work");
	}
}

Test(stats, per_communicator_and_op_with_the_kernels_bounds, .timeout = 120)
{
	char *argv[] = { NULL, "stats", "--json", "--timeline", "-o", NULL, "--",
			 NCCL_LOOP, "2", "--ranks", "2", "--kernel-us", "20", NULL };
	long long pid, calls, bytes, launches, kernels, copies, idle, all_launches = 0, all_kernels = 0;
	json_t *stats = NULL, *ev, *api;
	size_t i;
	struct run r;

	run_init(&r);
	argv[5] = r.events;
	run_cuprobe(&r, argv);
	r.json = load_json_lines(r.events);
	pid = line_value(r.summary, "pid");
	json_array_foreach(r.json, i, ev)
		if (!strcmp(jstr(ev, "type"), "stats") && jint(ev, "pid") == pid)
			stats = ev;
	cr_assert_not_null(stats, "no report for nccl_loop");
	for (i = 0; i < r.op_count; i++) {
		stats_op(stats, r.ops[i].op, &calls, &bytes, &launches, &kernels, &copies, &idle);
		cr_assert_eq(calls, r.ops[i].calls, "%s calls", r.ops[i].op);
		cr_assert_eq(copies, r.ops[i].copies, "%s copies", r.ops[i].op);
		cr_assert_eq(idle, r.ops[i].no_gpu_work, "%s calls with no GPU work", r.ops[i].op);
		cr_assert_eq(bytes, r.ops[i].bytes, "%s bytes", r.ops[i].op);
		cr_assert_eq(launches, r.ops[i].launches, "%s launches", r.ops[i].op);
		all_launches += launches;
		all_kernels += kernels;
	}
	/* Every kernel bounded (the exit bounds the last ones) and given to a row. */
	cr_assert_eq(all_kernels, all_launches);
	cr_assert_eq(all_launches, line_value(r.summary, "launches"));
	/* The API table counts probe hits: ncclBcast's own ncclBroadcast among them. */
	json_array_foreach(json_object_get(stats, "apis"), i, api) {
		const char *name = jstr(api, "api");

		if (strncmp(name, "nccl", 4))
			continue;
		cr_assert_eq(jint(api, "calls"), api_calls(&r, name) +
			     (!strcmp(name, "ncclBroadcast") ? api_calls(&r, "ncclBcast") : 0), "%s", name);
	}
	run_free(&r);
}

Test(attach, late_attach_is_exact_from_the_attach_on, .timeout = 120)
{
	char *workload[] = { NCCL_LOOP, "2", "--wait-signal", NULL };
	char *argv[] = { CUPROBE_BIN, "trace", "-v", "--json", "-o", NULL, "-p", NULL, NULL };
	struct run_opts work_opts = { 0 }, opts = { 0 };
	char pid_text[16], *work_out;
	long long pid;
	pid_t target, cuprobe;
	size_t i;
	json_t *ev;
	struct run r;

	run_init(&r);
	work_out = path_join(r.dir, "workload.txt");
	work_opts.stdout_path = work_out;
	target = spawn_program(workload, &work_opts);
	cr_assert(wait_for_text(work_out, "ready", 30), "nccl_loop never got ready");
	snprintf(pid_text, sizeof(pid_text), "%d", target);
	argv[5] = r.events;
	argv[7] = pid_text;
	opts.stdout_path = r.out;
	opts.stderr_path = r.err;
	cuprobe = spawn_program(argv, &opts);
	cr_assert(wait_for_text(r.err, "Ctrl-C stops", 60), "cuprobe did not start: %s", read_text(r.err));
	/* Its NCCL was mapped before: found in its maps and probed at the start. */
	cr_assert(strstr(read_text(r.err), "NCCL probes attached"), "%s", read_text(r.err));
	kill(target, SIGUSR1);
	cr_assert_eq(wait_program(target, 60), 0);
	r.status = wait_program(cuprobe, 60);
	cr_assert_eq(r.status, 0, "cuprobe: %s", read_text(r.err));
	r.out_text = read_text(work_out);
	r.err_text = read_text(r.err);
	read_workload(&r);
	r.json = load_json_lines(r.events);
	pid = line_value(r.summary, "pid");
	check_ops(&r, pid);
	check_links(&r, pid);
	/*
	 * NCCL looked its kernels up before the attach: every launch is named
	 * from the driver's record, read by the launch probe (the workload exits
	 * right after, before cuprobe has read most of its launches).
	 */
	json_array_foreach(r.json, i, ev)
		if (!strcmp(jstr(ev, "type"), "launch") && jint(ev, "pid") == pid)
			cr_assert_str_eq(jstr(ev, "name_source"), "driver", "%s", jstr(ev, "kernel"));
	cr_assert(strstr(r.err_text, " 0 of "), "launches left unnamed: %s", r.err_text);
	/* Made before the attach, the communicator is learned from the queries: rank and size, no id. */
	json_array_foreach(r.json, i, ev) {
		if (!nccl_of(ev, pid) || !json_object_get(ev, "bytes") || jint(ev, "nranks") == -1)
			continue;
		cr_assert_eq(jint(ev, "rank"), 0);
		cr_assert_eq(jint(ev, "nranks"), 1);
		cr_assert_eq(jint(ev, "device"), 0);
		cr_assert_str_eq(jstr(ev, "comm_id"), "0x0");
	}
	free(work_out);
	run_free(&r);
}

Test(run, nccl_family_counts_every_collective, .timeout = 120)
{
	char *argv[] = { NULL, "run", EXAMPLES_DIR "/nccl_bytes.bpf.c", "--json", "-o", NULL, "--",
			 NCCL_LOOP, "2", "--ranks", "2", NULL };
	static const char *const ops[] = {
		"", "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
		"all_to_all", "gather", "scatter", "send", "recv",
	};
	json_t *line, *entries = NULL, *entry;
	long long pid;
	size_t i, j, k;
	struct run r;

	run_init(&r);
	argv[5] = r.events;
	run_cuprobe(&r, argv);
	r.json = load_json_lines(r.events);
	pid = line_value(r.summary, "pid");
	json_array_foreach(r.json, i, line)
		if (!strcmp(jstr(line, "type"), "map") && !strcmp(jstr(line, "map"), "nccl_bytes"))
			entries = json_object_get(line, "entries");
	cr_assert(json_is_array(entries), "nccl_bytes not printed: %s", r.err_text);
	for (k = 1; k < sizeof(ops) / sizeof(ops[0]); k++) {
		long long calls = 0, bytes = 0, want_calls = 0, want_bytes = 0;

		json_array_foreach(entries, j, entry) {
			json_t *key = json_object_get(entry, "key"), *value = json_object_get(entry, "value");

			if (jint(key, "pid") != pid || jint(key, "op") != (long long)k)
				continue;
			calls += jint(value, "calls");
			bytes += jint(value, "bytes");
		}
		for (i = 0; i < r.op_count; i++)
			if (!strcmp(r.ops[i].op, ops[k])) {
				want_calls = r.ops[i].calls;
				want_bytes = r.ops[i].bytes;
			}
		/* ncclBcast's ncclBroadcast is a call of its own to a program: as many more broadcasts. */
		if (!strcmp(ops[k], "broadcast")) {
			/* nccl_loop's ncclBcast moves float64: elements x 8 each. */
			want_calls += api_calls(&r, "ncclBcast");
			want_bytes += api_calls(&r, "ncclBcast") * line_value(r.summary, "elements") * 8;
		}
		cr_assert_eq(calls, want_calls, "%s calls", ops[k]);
		cr_assert_eq(bytes, want_bytes, "%s bytes", ops[k]);
	}
	run_free(&r);
}

/* The sum of a family's series of pid and op in a text exposition. */
static double metric_sum(const char *text, const char *family, long long pid, const char *op)
{
	char pid_label[32], op_label[64];
	const char *line = text;
	double sum = 0;

	snprintf(pid_label, sizeof(pid_label), "pid=\"%lld\"", pid);
	snprintf(op_label, sizeof(op_label), "op=\"%s\"", op);
	while (line && *line) {
		const char *end = strchr(line, '\n'), *close;
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char copy[1024];

		if (len < sizeof(copy) && !strncmp(line, family, strlen(family)) && line[strlen(family)] == '{') {
			memcpy(copy, line, len);
			copy[len] = '\0';
			close = strrchr(copy, '}');
			if (close && strstr(copy, pid_label) && strstr(copy, op_label))
				sum += strtod(close + 1, NULL);
		}
		line = end ? end + 1 : NULL;
	}
	return sum;
}

Test(exporter, nccl_calls_and_bytes_per_op_and_gpu, .timeout = 180)
{
	static const char *const args[] = { "-i", "0.3", NULL };
	char *workload[] = { NCCL_LOOP, "2", "--ranks", "2", "--start-delay", "1000", NULL };
	struct exporter_proc exporter = { 0 };
	struct http_reply reply = { 0 };
	double deadline;
	size_t i;
	long long pid;
	struct run r;

	run_init(&r);
	exporter_start(&exporter, r.dir, args);
	r.status = run_program(workload, &(struct run_opts){ .stdout_path = r.out }, NULL);
	cr_assert_eq(r.status, 0);
	r.out_text = read_text(r.out);
	r.err_text = strdup("");
	read_workload(&r);
	pid = line_value(r.summary, "pid");
	/* Exited, its series stay (--keep-exited): wait for the read after its exit. */
	deadline = now_seconds() + 30;
	for (;;) {
		http_reply_free(&reply);
		cr_assert(http_get(exporter.port, "/metrics", NULL, &reply), "no answer from the exporter");
		if (metric_sum(reply.body, "cuprobe_nccl_calls_total", pid, "comm_destroy") > 0)
			break;
		cr_assert_lt(now_seconds(), deadline, "no NCCL series of pid %lld:\n%s", pid, reply.body);
		usleep(200000);
	}
	for (i = 0; i < r.op_count; i++) {
		cr_assert_eq(metric_sum(reply.body, "cuprobe_nccl_calls_total", pid, r.ops[i].op),
			     (double)r.ops[i].calls, "%s calls", r.ops[i].op);
		cr_assert_eq(metric_sum(reply.body, "cuprobe_nccl_bytes_total", pid, r.ops[i].op),
			     (double)r.ops[i].bytes, "%s bytes", r.ops[i].op);
	}
	/* A GPU label: the communicators' device 0. */
	cr_assert(strstr(reply.body, "op=\"all_reduce\"") && strstr(reply.body, "gpu=\"0\""));
	http_reply_free(&reply);
	cr_assert_eq(exporter_stop(&exporter), 0);
	free(exporter.err_path);
	run_free(&r);
}

/*
 * --python: a Python program calling the simulated NCCL through ctypes (its
 * libnccl dlopen'd: an attach event, the process held until probed); each
 * all_reduce's record names the Python stack that made it, whose innermost
 * frame is the line marked "# @all_reduce".
 */
static const char nccl_py[] =
	"import ctypes, sys\n"
	"class UniqueId(ctypes.Structure):\n"
	"    _fields_ = [('internal', ctypes.c_char * 128)]\n"
	"cuda = ctypes.CDLL(sys.argv[1])\n"
	"nccl = ctypes.CDLL(sys.argv[2])\n"
	"ptr = ctypes.c_void_p\n"
	"context, buffer = ptr(), ctypes.c_uint64()\n"
	"assert cuda.cuInit(0) == 0\n"
	"assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0\n"
	"assert cuda.cuCtxSetCurrent(context) == 0\n"
	"assert cuda.cuMemAlloc_v2(ctypes.byref(buffer), 4096) == 0\n"
	"uid, comm = UniqueId(), ptr()\n"
	"nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ptr), ctypes.c_int, UniqueId, ctypes.c_int]\n"
	"assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0\n"
	"assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0\n"
	"nccl.ncclAllReduce.argtypes = [ptr, ptr, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ptr, ptr]\n"
	"def step():\n"
	"    assert nccl.ncclAllReduce(buffer.value, buffer.value, 1024, 7, 0, comm, None) == 0  # @all_reduce\n"
	"for i in range(5):\n"
	"    step()\n"
	"assert nccl.ncclCommDestroy(comm) == 0\n"
	"print('nccl_py: done')\n";

Test(python, nccl_records_carry_the_calling_python_stack, .timeout = 120)
{
	char *argv[24] = { NULL, "trace", "--json", "--python", "--lib", CUDA_SIM_LIB, "-o", NULL, "--" };
	json_t *ev, *stack, *inner;
	size_t i, n = 9, marked = 0, all_reduces = 0;
	char *script;
	struct run r;
	int line = 0;

	run_init(&r);
	script = path_join(r.dir, "nccl.py");
	cr_assert(write_text(script, nccl_py));
	/* The marked line, 1-based. */
	for (i = 0, line = 1; nccl_py + i < strstr(nccl_py, "# @all_reduce"); i++)
		line += nccl_py[i] == '\n';
	argv[7] = r.events;
#ifdef ASAN_RUNTIME
	argv[n++] = "/usr/bin/env";
	argv[n++] = "LD_PRELOAD=" ASAN_RUNTIME;
	argv[n++] = "ASAN_OPTIONS=detect_leaks=0";
#endif
	argv[n++] = PYTHON_BIN;
	argv[n++] = script;
	argv[n++] = CUDA_SIM_LIB;
	argv[n++] = NCCL_SIM_LIB;
	argv[n] = NULL;
	argv[0] = CUPROBE_BIN;
	r.status = run_program(argv, &(struct run_opts){ .stdout_path = r.out, .stderr_path = r.err },
			       NULL);
	r.err_text = read_text(r.err);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_assert(strstr(read_text(r.out), "nccl_py: done"));
	r.json = load_json_lines(r.events);
	json_array_foreach(r.json, i, ev) {
		if (strcmp(jstr(ev, "type"), "nccl") || strcmp(jstr(ev, "op"), "all_reduce"))
			continue;
		all_reduces++;
		/* The frames ride on the record, innermost first. */
		stack = json_object_get(ev, "py_stack");
		cr_assert(json_is_array(stack) && json_array_size(stack) > 0,
			  "an all_reduce without its stack");
		inner = json_array_get(stack, 0);
		cr_assert(strstr(jstr(inner, "file"), "nccl.py"), "%s", jstr(inner, "file"));
		marked += jint(inner, "line") == line;
	}
	cr_assert_eq(all_reduces, 5);
	cr_assert_eq(marked, 5, "the innermost frame is not line %d", line);
	/* Its libnccl came by an attach event while it ran. */
	cr_assert(strstr(r.err_text, "NCCL file"), "%s", r.err_text);
	free(script);
	run_free(&r);
}
