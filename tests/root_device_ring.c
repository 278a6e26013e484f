// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Device rings (CUPROBE_GPU_RING) end to end against the simulated driver,
 * which stands in for the GPU code: at each launch of an instrumented
 * vec_add whose module declares a ring's segments, it writes
 * gpu_warp_exits.bpf.c's records (one per warp) into them by the
 * translator's protocol. The injection moves them into the ring's maps at
 * each sync, completed query and blocking copy, and `cuprobe run` reads the
 * maps then and at each process exit: every record up to the last proving
 * call is delivered, a full segment's records are counted lost per launch,
 * and a thousand processes ending at random points (exit, SIGKILL, exit()
 * from a destructor, killed with a record reserved and not written) leave
 * cuprobe running, every record accounted for, and no BPF program, link or
 * map behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <criterion/criterion.h>

#include "helpers.h"

/* The thousand exits' budget on 2 cores; ASan (every process of the loop sanitized) slows them 3 to 4 times. */
#ifdef __SANITIZE_ADDRESS__
#define EXITS_SECONDS 360.0
#else
#define EXITS_SECONDS 90.0
#endif

#define WARPS_PER_LAUNCH 32 /* drv_launch: 1024 elements, blocks of 256 threads: 4 x 8 warps */

/* gpu_warp_exits's record on a ring of RECORDS slots, for the full-ring test. */
static const char small_ring_program[] =
	"#include \"vmlinux.h\"\n"
	"#include \"cuprobe.bpf.h\"\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n"
	"struct warp_exit { __u32 block, warp, sm, pad; __u64 exit_ns; };\n"
	"CUPROBE_GPU_RING(small, struct warp_exit, %d);\n"
	"SEC(\"gpu.exit/vec_add*\") int GPU_PROG(warp_exit)\n"
	"{\n"
	"\tstruct warp_exit r = { .block = (__u32)cuprobe_gpu_block_index(ctx) };\n"
	"\tif (cuprobe_gpu_thread_index(ctx) %% 32 == 0)\n"
	"\t\tcuprobe_gpu_output(small, ctx, &r);\n"
	"\treturn 0;\n"
	"}\n";

/* A run's directory (images: CUDA_SIM_IMAGE_DIR), its output files and what they held. */
struct run {
	char *dir, *images, *out_path, *err_path;
	char *out_text, *err_text;
	int status;
};

static void setup_run(struct run *r)
{
	require_root();
	*r = (struct run){ .dir = make_tmpdir() };
	r->images = path_join(r->dir, "images");
	r->out_path = path_join(r->dir, "stdout");
	r->err_path = path_join(r->dir, "stderr");
	cr_assert_eq(mkdir(r->images, 0755), 0);
}

/* `cuprobe run PROG [--json] -- COMMAND...` with the simulated driver writing down launches. */
static void run_cuprobe(struct run *r, const char *prog, bool json, char *const *command,
			double *elapsed)
{
	char *argv[64] = { CUPROBE_BIN, "run", (char *)prog }, env_line[4200];
	char *env[] = { env_line, NULL };
	struct run_opts opts = { .stdout_path = r->out_path, .stderr_path = r->err_path,
				 .extra_env = env };
	int n = 3, i;

	snprintf(env_line, sizeof(env_line), "CUDA_SIM_IMAGE_DIR=%s", r->images);
	if (json)
		argv[n++] = "--json";
	argv[n++] = "--";
	for (i = 0; command[i]; i++)
		argv[n++] = command[i];
	r->status = run_program(argv, &opts, elapsed);
	r->err_text = read_text(r->err_path);
	cr_assert_not_null(r->err_text);
	r->out_text = read_text(r->out_path);
}

static void free_run(struct run *r)
{
	char *owned[] = { r->dir, r->images, r->out_path, r->err_path, r->out_text, r->err_text };
	size_t i;

	remove_tree(r->dir);
	for (i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
		free(owned[i]);
}

/* The one device_ring summary of the output. */
static json_t *ring_summary(json_t *all)
{
	json_t *found = NULL, *e;
	size_t i;

	json_array_foreach(all, i, e)
		if (!strcmp(jstr(e, "type"), "device_ring")) {
			cr_assert_null(found, "one summary per ring");
			found = e;
		}
	cr_assert_not_null(found, "no device_ring summary");
	return found;
}

/* The summary's launch with that seq: delivered and lost. */
static void launch_counts(json_t *summary, long long seq, long long *delivered, long long *lost)
{
	json_t *launches = json_object_get(summary, "launches"), *l;
	size_t i;

	json_array_foreach(launches, i, l)
		if (jint(l, "launch_seq") == seq) {
			*delivered = jint(l, "delivered");
			*lost = jint(l, "lost");
			return;
		}
	cr_assert_fail("no launch %lld in the summary", seq);
}

Test(device_ring, every_record_up_to_the_last_sync_is_delivered_once, .timeout = 120)
{
	char *command[] = { DRV_LAUNCH, "3", "--sync-every", "1", NULL };
	static bool seen[4][4][8]; /* launch 1-3, block, warp */
	long long delivered, lost;
	json_t *all, *e, *summary, *record;
	size_t i, records = 0;
	struct run r;

	setup_run(&r);
	run_cuprobe(&r, EXAMPLES_DIR "/gpu_warp_exits.bpf.c", true, command, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	all = load_json_lines(r.out_path);
	json_array_foreach(all, i, e) {
		long long seq, block, warp;

		if (strcmp(jstr(e, "type"), "device_record"))
			continue;
		cr_assert_str_eq(jstr(e, "ring"), "warp_exits");
		record = json_object_get(e, "record");
		seq = jint(e, "launch_seq");
		block = jint(record, "block");
		warp = jint(record, "warp");
		cr_assert(seq >= 1 && seq <= 3 && block >= 0 && block < 4 && warp >= 0 && warp < 8,
			  "launch %lld block %lld warp %lld", seq, block, warp);
		cr_expect_not(seen[seq][block][warp], "launch %lld block %lld warp %lld twice", seq, block,
			      warp);
		seen[seq][block][warp] = true;
		cr_expect_eq(jint(record, "sm"), block % 132);
		records++;
	}
	cr_expect_eq(records, 3 * WARPS_PER_LAUNCH, "%s", r.out_text);
	summary = ring_summary(all);
	cr_expect_eq(jint(summary, "produced"), 3 * WARPS_PER_LAUNCH);
	cr_expect_eq(jint(summary, "delivered"), 3 * WARPS_PER_LAUNCH);
	cr_expect_eq(jint(summary, "lost"), 0);
	cr_expect_eq(jint(summary, "abandoned"), 0);
	cr_expect_eq(jint(summary, "pending"), 0);
	for (i = 1; i <= 3; i++) {
		launch_counts(summary, (long long)i, &delivered, &lost);
		cr_expect(delivered == WARPS_PER_LAUNCH && lost == 0, "launch %zu: %lld, %lld lost", i,
			  delivered, lost);
	}
	cr_expect_not_null(strstr(r.err_text, "cuprobe: device ring warp_exits: 96 records produced, 96 delivered, 0 lost, 0 abandoned"),
			   "%s", r.err_text);
	/* The ring's maps are records, not maps printed at the end. */
	cr_expect_null(strstr(r.out_text, "warp_exits__control"), "%s", r.out_text);
	json_decref(all);
	free_run(&r);

	/* As text: one line per record, the launch's seq after the ring's name. */
	setup_run(&r);
	run_cuprobe(&r, EXAMPLES_DIR "/gpu_warp_exits.bpf.c", false, command, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_expect_not_null(strstr(r.out_text, "warp_exits launch 1: {block=0 warp=0 sm=0 exit_ns="), "%s",
			   r.out_text);
	cr_expect_not_null(strstr(r.out_text, "warp_exits launch 3: {block=3 warp=7 sm=3 exit_ns="), "%s",
			   r.out_text);
	free_run(&r);
}

/*
 * Four threads, each launching on its own stream and synchronizing it: a
 * sync that leaves another stream's launch unproved (or sees one launched
 * meanwhile) moves nothing, a later one that leaves none moves it all (the
 * last, drv_launch's context synchronization, at least). Every record is
 * delivered once, none lost.
 */
Test(device_ring, streams_of_several_threads_deliver_every_record_once, .timeout = 120)
{
	char *command[] = { DRV_LAUNCH, "40", "4", "--sync-every", "1", NULL };
	long long produced = 4 * 40 * WARPS_PER_LAUNCH;
	json_t *all, *e, *summary;
	size_t i, records = 0;
	char *seen = calloc((size_t)produced, 1), expected[160];
	struct run r;

	cr_assert_not_null(seen);
	setup_run(&r);
	run_cuprobe(&r, EXAMPLES_DIR "/gpu_warp_exits.bpf.c", true, command, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	all = load_json_lines(r.out_path);
	json_array_foreach(all, i, e) {
		json_t *record = json_object_get(e, "record");
		long long seq, at;

		if (strcmp(jstr(e, "type"), "device_record"))
			continue;
		seq = jint(e, "launch_seq");
		cr_assert(seq >= 1 && seq <= 160, "launch %lld", seq);
		at = (seq - 1) * WARPS_PER_LAUNCH + jint(record, "block") * 8 + jint(record, "warp");
		cr_expect_not(seen[at], "launch %lld, warp %lld twice", seq, at % WARPS_PER_LAUNCH);
		seen[at] = 1;
		records++;
	}
	cr_expect_eq((long long)records, produced, "%s", r.err_text);
	summary = ring_summary(all);
	cr_expect_eq(jint(summary, "produced"), produced);
	cr_expect_eq(jint(summary, "delivered"), produced);
	cr_expect_eq(jint(summary, "lost"), 0);
	cr_expect_eq(jint(summary, "abandoned"), 0);
	snprintf(expected, sizeof(expected), "cuprobe: device ring warp_exits: %lld records produced, %lld delivered, 0 lost, 0 abandoned",
		 produced, produced);
	cr_expect_not_null(strstr(r.err_text, expected), "%s", r.err_text);
	/* Nothing is left on the GPU: no module's records went unmoved. */
	cr_expect_null(strstr(r.err_text, "no synchronization could move"), "%s", r.err_text);
	json_decref(all);
	free_run(&r);
	free(seen);
}

/*
 * A ring of 16 slots and launches of 32 records: the second half of the
 * first launch finds the ring full (nothing reads it during a launch).
 * Later launches race the agent, which empties the ring after each sync
 * while the process goes on: whatever each gets, it is counted.
 */
Test(device_ring, a_full_ring_counts_what_did_not_fit_per_launch, .timeout = 120)
{
	char *command[] = { DRV_LAUNCH, "3", "--sync-every", "1", NULL };
	long long delivered, lost, seq;
	char text[2048], *prog;
	json_t *all, *summary;
	struct run r;

	setup_run(&r);
	prog = path_join(r.dir, "small.bpf.c");
	snprintf(text, sizeof(text), small_ring_program, 16);
	cr_assert(write_text(prog, text));
	run_cuprobe(&r, prog, true, command, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	all = load_json_lines(r.out_path);
	summary = ring_summary(all);
	cr_expect_eq(jint(summary, "produced"), 3 * WARPS_PER_LAUNCH);
	cr_expect_eq(jint(summary, "delivered") + jint(summary, "lost"), 3 * WARPS_PER_LAUNCH);
	cr_expect_eq((long long)count_events(all, "device_record", NULL), jint(summary, "delivered"),
		     "%s", r.out_text);
	launch_counts(summary, 1, &delivered, &lost);
	cr_expect(delivered == 16 && lost == 16, "launch 1: %lld, %lld lost", delivered, lost);
	for (seq = 2; seq <= 3; seq++) {
		launch_counts(summary, seq, &delivered, &lost);
		cr_expect(delivered + lost == WARPS_PER_LAUNCH && delivered <= 16,
			  "launch %lld: %lld, %lld lost", seq, delivered, lost);
	}
	snprintf(text, sizeof(text), "cuprobe: warning: %lld records of device ring small lost to a full ring (16 slots; on the GPU 1 segment(s) of 16, moved at syncs that leave no kernel running)",
		 jint(summary, "lost"));
	cr_expect_not_null(strstr(r.err_text, text), "%s", r.err_text);
	json_decref(all);
	free(prog);
	free_run(&r);
}

/* The newest id of BPF programs, links or maps now. */
static __u32 newest_id(int (*next_id)(__u32, __u32 *))
{
	__u32 id = 0, next;

	while (!next_id(id, &next))
		id = next;
	return id;
}

static bool nothing_newer(__u32 prog_base, __u32 link_base, __u32 map_base)
{
	int tries;

	for (tries = 0; tries < 100; tries++) {
		__u32 prog = prog_base, link = link_base, map = map_base;

		if (bpf_prog_get_next_id(prog, &prog) && bpf_link_get_next_id(link, &link) &&
		    bpf_map_get_next_id(map, &map))
			return true;
		usleep(20000);
	}
	return false;
}

/* An 8-byte counter file: the simulated driver's ring.committed, drv_launch's --proved. */
static long long counter_file(const char *dir, const char *name)
{
	char *path = path_join(dir, name);
	uint64_t counted = 0;
	FILE *f = fopen(path, "rb");

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fread(&counted, sizeof(counted), 1, f), 1);
	fclose(f);
	free(path);
	return (long long)counted;
}

/*
 * A thousand processes of COMMAND's tree, one after the other, each ending
 * at a random point: a normal exit, exit() from a destructor, SIGKILL from
 * outside at a random moment, or SIGKILL with a record reserved and not
 * committed. cuprobe neither crashes nor hangs; every record of a launch
 * that a returned stream sync covered (drv_launch's --proved count) is
 * delivered, and none that the GPU did not commit; the abandoned slots
 * (a process killed while the drain appends) are no more than the processes
 * killed; nothing of cuprobe's is left in the kernel.
 */
Test(device_ring, a_thousand_exits_at_random_points, .timeout = 420)
{
	static const char loop[] =
		"kills=0 held=0\n"
		"for i in $(seq 1 1000); do\n"
		"  case $((RANDOM %% 4)) in\n"
		"  0) %s 1 --proved %s >/dev/null ;;\n"
		"  1) %s 1 --exit-in-destructor --proved %s >/dev/null ;;\n"
		"  2) %s 1 --proved %s >/dev/null & sleep 0.00$((RANDOM %% 3)); kill -9 $! 2>/dev/null; wait $!\n"
		"     kills=$((kills + 1)) ;;\n"
		"  3) CUDA_SIM_RING_KILL_AT=$((RANDOM %% 32 + 1)) %s 1 --proved %s >/dev/null\n"
		"     kills=$((kills + 1)) held=$((held + 1)) ;;\n"
		"  esac\n"
		"done\n"
		"echo \"kills=$kills held=$held\" >&2\n";
	__u32 prog_base = newest_id(bpf_prog_get_next_id), link_base = newest_id(bpf_link_get_next_id);
	__u32 map_base = newest_id(bpf_map_get_next_id);
	char script[4096], *command[] = { "/bin/bash", "-c", script, NULL }, *proved_path;
	long long committed, proved, delivered, abandoned, kills, held;
	json_t *all, *summary;
	double elapsed;
	const char *at;
	struct run r;

	setup_run(&r);
	proved_path = path_join(r.dir, "proved");
	snprintf(script, sizeof(script), loop, DRV_LAUNCH, proved_path, DRV_LAUNCH, proved_path,
		 DRV_LAUNCH, proved_path, DRV_LAUNCH, proved_path);
	run_cuprobe(&r, EXAMPLES_DIR "/gpu_warp_exits.bpf.c", true, command, &elapsed);
	cr_assert(r.status == 0 || r.status == 1, "status %d: %s", r.status, r.err_text);
	cr_expect_lt(elapsed, EXITS_SECONDS, "1000 exits took %.1f s", elapsed);
	at = strstr(r.err_text, "kills=");
	cr_assert_not_null(at, "%s", r.err_text);
	kills = atoll(at + strlen("kills="));
	at = strstr(at, "held=");
	cr_assert_not_null(at, "%s", r.err_text);
	held = atoll(at + strlen("held="));

	all = load_json_lines(r.out_path);
	summary = ring_summary(all);
	delivered = jint(summary, "delivered");
	abandoned = jint(summary, "abandoned");
	committed = counter_file(r.images, "ring.committed");
	proved = counter_file(r.dir, "proved");
	/* Every record printed is counted, and every one counted was printed. */
	cr_expect_eq((long long)count_events(all, "device_record", NULL), delivered);
	cr_expect_eq(jint(summary, "produced"), delivered + jint(summary, "lost") + abandoned);
	cr_expect_eq(jint(summary, "pending"), 0);
	cr_expect_eq(jint(summary, "lost"), 0, "a 65,536-slot ring read at every sync and exit");
	/*
	 * Every record of a launch a returned sync covered is delivered (the
	 * drain ran inside that sync), and nothing the GPU did not commit; what
	 * a process killed before its sync had committed stays on its GPU. A
	 * slot is abandoned only by a process killed inside a drain's append.
	 */
	cr_expect(delivered >= proved * WARPS_PER_LAUNCH && delivered <= committed,
		  "delivered %lld: %lld launches proved done, %lld records committed (%lld killed, %lld holding a slot)",
		  delivered, proved, committed, kills, held);
	cr_expect(abandoned <= kills, "abandoned %lld, killed %lld", abandoned, kills);
	cr_expect_gt(proved, 300, "%lld of 1000 processes saw their launch done", proved);
	free(proved_path);
	json_decref(all);

	/* Nothing of cuprobe's is left in the kernel (freed after an RCU grace period: waited for). */
	cr_expect(nothing_newer(prog_base, link_base, map_base), "a BPF program, link or map left behind");
	free_run(&r);
}
