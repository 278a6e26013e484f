// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe run PROG`: a user's BPF programs on CUDA calls. PROG (compiled
 * first when it is C) goes through the session's one load-and-attach path
 * with cuprobe's naming, context and lifecycle programs; the agent prints
 * every record of its rings, the main thread its maps every interval and at
 * the end, all formatted from PROG's BTF.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "cli_options.h"
#include "cuprobe_internal.h"
#include "device.h"
#include "device/device.h"
#include "gpu_rings.h"
#include "record_path.h"
#include "session.h"
#include "spawn.h"
#include "trust.h"

#define PROGRAM_MAX_BYTES (64u << 20)
/* Exited processes whose kernel names are kept for the maps printed later. */
#define EXITED_NAMES_KEPT 256
/* Entries printed of each map by default: the rest are counted. */
#define RUN_MAX_ENTRIES 1000

/* One ring of PROG, consumed on the agent thread. */
struct ring_ctx {
	struct run_ctx *run;
	size_t index;
	struct cp_program_ring_info info;
	uint64_t printed;
	uint64_t short_records;
};

struct run_ctx {
	struct cp_session *session;
	const struct btf *btf;
	enum cp_format format;
	bool failed;
	uint64_t start_ns;
	/* Agent thread and main thread both write: one line (or map) at a time. */
	pthread_mutex_t lock;
	struct ring_ctx *rings;
	size_t ring_count;
	struct cp_text text;
	size_t max_entries;        /* printed a map at most; 0: all */
	uint64_t not_printed;      /* entries the final maps left out */
	uint32_t exited[EXITED_NAMES_KEPT];
	size_t exited_count;
	struct cp_record_path path;
	struct cp_run_gpu_rings gpu_rings;
};

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Writes what text holds; a failed write stops the session. Called with the lock held. */
static void flush_text(struct run_ctx *run, struct cp_text *text)
{
	if (!run->failed && text->len &&
	    !cp_session__write_text(run->session, &run->session->output, text, true))
		run->failed = true;
}

/* The same for a part of a map, which the next write ends: a full disk takes the map back whole. */
static void flush_part(struct run_ctx *run, struct cp_text *text)
{
	if (run->failed || !text->len)
		return;
	if (text->failed || !cp_output__write_part(&run->session->output, text->data, text->len)) {
		run->failed = true;
		cp_session__output_failed(run->session, text->failed ? ENOMEM : errno);
	}
}

static int on_record(void *arg, const void *data, size_t size)
{
	struct ring_ctx *ring = arg;
	struct run_ctx *run = ring->run;
	struct cp_btf_names names = { .names = run->session->names,
				      .symbolizer = run->session->symbolizer,
				      .tracer = run->session->tracer,
				      .python = run->session->python };

	/* Shorter than its declared type: counted, not printed from bytes it lacks. */
	if (ring->info.type_id && size < ring->info.record_size) {
		ring->short_records++;
		return 0;
	}
	pthread_mutex_lock(&run->lock);
	cp_text__clear(&run->text);
	cp_format__program_record(&run->text, run->format, run->btf, &ring->info, data, size, &names);
	flush_text(run, &run->text);
	if (!run->failed)
		ring->printed++;
	pthread_mutex_unlock(&run->lock);
	return 0;
}

/*
 * cuprobe's own records (the session learns their names and reads mappings
 * at cuInit): an exited process stays for the maps printed later, the last
 * EXITED_NAMES_KEPT of them; older ones go.
 */
static int on_settled(void *arg, const union cp_event *event)
{
	struct run_ctx *run = arg;

	if (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT) {
		size_t slot = run->exited_count++ % EXITED_NAMES_KEPT;

		if (run->exited_count > EXITED_NAMES_KEPT)
			cp_record_path__forget(&run->path, run->exited[slot]);
		run->exited[slot] = event->hdr.pid;
	}
	cp_run_gpu_rings__observe(&run->gpu_rings, event);
	return 0;
}

/* A device ring's slots or control block: its records are printed as they come, not as a map. */
static bool is_device_ring_map(const struct btf *btf, const struct cp_program_map_info *info)
{
	const struct btf_type *t = btf ? btf__type_by_id(btf, info->value_type_id) : NULL;
	const char *name = t ? btf__name_by_offset(btf, t->name_off) : NULL;

	return name && !strncmp(name, "cuprobe_gpu_ring_", strlen("cuprobe_gpu_ring_"));
}

/* Text past this is written before more is formatted: a map of any size streams through. */
#define MAP_TEXT_FLUSH_BYTES (64u << 10)

/*
 * One map of PROG, read a batch at a time and written as it goes: at most
 * run->max_entries entries (0: all), the rest counted. Called with the lock held.
 */
static void print_map(struct run_ctx *run, size_t index, struct cp_text *text,
		      const struct cp_btf_names *names, uint64_t *not_printed)
{
	CP_OPTS(cp_map_reader_opts, reader_opts, .skip_zero = true);
	struct cp_program_map_info info;
	struct cp_map_reader *reader;
	struct cp_map_entries batch;
	size_t printed = 0, take;
	uint64_t left_out = 0;
	int n = 0;

	if (cp_program__map(run->session->program, index, &info) || is_device_ring_map(run->btf, &info))
		return;
	reader = cp_program__map_reader(run->session->program, index, &reader_opts);
	if (!reader) {
		cp_format__program_map_unreadable(text, run->format, &info, -errno);
		return;
	}
	/* What came before (the header, earlier maps) is whole: a map cut short takes back only itself. */
	if (!run->failed && text->len &&
	    !cp_session__write_text(run->session, &run->session->output, text, false))
		run->failed = true;
	cp_text__clear(text);
	cp_format__program_map_begin(text, run->format, &info);
	while (!run->failed && (n = cp_map_reader__next(reader, &batch)) > 0) {
		take = batch.count;
		if (run->max_entries && take > run->max_entries - printed)
			take = run->max_entries - printed;
		left_out += batch.count - take;
		if (!take)
			continue; /* only counting what is left out */
		batch.count = take;
		cp_format__program_map_entries(text, run->format, run->btf, &info, &batch, printed,
					       names);
		printed += take;
		if (text->len >= MAP_TEXT_FLUSH_BYTES) {
			flush_part(run, text);
			cp_text__clear(text);
		}
	}
	cp_format__program_map_end(text, run->format, &info, printed, left_out, n < 0 ? n : 0);
	cp_map_reader__free(reader);
	*not_printed += left_out;
}

/* Every map of PROG, after a header saying when. */
static void print_maps(struct run_ctx *run, bool final)
{
	const struct cp_program *program = run->session->program;
	struct cp_btf_names names = { .names = run->session->names,
				      .symbolizer = run->session->symbolizer,
				      .tracer = run->session->tracer,
				      .python = run->session->python };
	struct cp_text text = { 0 };
	size_t i, count = cp_program__map_count(program);
	uint64_t not_printed = 0;

	if (!count)
		return;
	pthread_mutex_lock(&run->lock);
	cp_format__program_maps_header(&text, run->format, monotonic_ns() - run->start_ns, final);
	for (i = 0; i < count && !run->failed; i++)
		print_map(run, i, &text, &names, &not_printed);
	flush_text(run, &text);
	if (final)
		run->not_printed = not_printed;
	pthread_mutex_unlock(&run->lock);
	cp_text__free(&text);
}

static void on_tick(void *arg)
{
	print_maps(arg, false);
}

/* Where cuprobe.bpf.h is: installed beside the binary (bin/../include/cuprobe), else the build's. */
static void sdk_dirs(char *first, size_t first_len, const char **second)
{
	char exe[PATH_MAX], candidate[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	*second = NULL;
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(candidate, sizeof(candidate), "%s/../include/cuprobe/cuprobe.bpf.h", exe);
			if (!access(candidate, R_OK) &&
			    snprintf(first, first_len, "-I%s/../include/cuprobe", exe) < (int)first_len)
				return;
		}
	}
	/* The build tree: the SDK's sources, and the generated vmlinux.h. */
	snprintf(first, first_len, "-I%s", CUPROBE_SDK_SOURCE_DIR);
	*second = "-I" CUPROBE_SDK_GENERATED_DIR;
}

/* The first clang on PATH, as the user would run it. */
static int find_clang(const struct cp_identity *id, char *path, size_t len)
{
	static const char *const names[] = { "clang", "clang-19", "clang-18", "clang-17", "clang-16",
					     "clang-15", "clang-14" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!cp_resolve_command(names[i], id, path, len))
			return 0;
	return -ENOENT;
}

static bool is_c_source(const char *name)
{
	size_t len = strlen(name);

	return len > 2 && !strcmp(name + len - 2, ".c");
}

/*
 * PROG's bytes: read, or compiled by clang to its stdout, as the invoking
 * user (who must be able to read it). 0, or the exit code after saying why.
 */
static int program_bytes(const struct cp_run_options *opts, const struct cp_identity *id,
			 void **elf, size_t *size)
{
	char clang[PATH_MAX], sdk[PATH_MAX + 64], why[PATH_MAX + 256];
	const char *generated;
	int status = 0, err;

	/* Loaded as root: nobody but root and the user may change it; a FIFO would never end. */
	if (cp_trust__check(opts->program, id, why, sizeof(why))) {
		cp_say("%s", why);
		return CP_EXIT_USAGE;
	}
	if (!is_c_source(opts->program)) {
		err = cp_capture_as_user(id, opts->program, NULL, PROGRAM_MAX_BYTES, elf, size, &status);
		if (!err && WIFEXITED(status) && WEXITSTATUS(status) == 0)
			return 0;
		free(*elf);
		*elf = NULL;
		cp_say("%s: %s", opts->program,
		       err == -EFBIG ? "larger than 64 MiB: not a BPF object" :
		       err ? strerror(-err) :
		       WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "no such file" :
		       WIFEXITED(status) && WEXITSTATUS(status) == 126 ? "permission denied" :
		       WIFEXITED(status) && WEXITSTATUS(status) == 124 ? "not a regular file" :
		       "cannot be read");
		return CP_EXIT_USAGE;
	}
	if (find_clang(id, clang, sizeof(clang))) {
		cp_say("%s: cannot compile it: clang is not installed (install clang, or compile it with clang -target bpf and pass the .bpf.o)",
		       opts->program);
		return CP_EXIT_SETUP;
	}
	sdk_dirs(sdk, sizeof(sdk), &generated);
	{
		char *argv[16];
		int n = 0;

		argv[n++] = clang;
		argv[n++] = "-g";
		argv[n++] = "-O2";
		argv[n++] = "-target";
		argv[n++] = "bpf";
		argv[n++] = "-D__TARGET_ARCH_x86";
		argv[n++] = "-Wall";
		argv[n++] = sdk;
		if (generated)
			argv[n++] = (char *)generated;
		argv[n++] = "-c";
		argv[n++] = (char *)opts->program;
		argv[n++] = "-o";
		argv[n++] = "-";
		argv[n] = NULL;
		err = cp_capture_as_user(id, clang, argv, PROGRAM_MAX_BYTES, elf, size, &status);
	}
	if (!err && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	free(*elf);
	*elf = NULL;
	if (err)
		cp_say("%s: cannot compile it: %s", opts->program, strerror(-err));
	else if (WIFEXITED(status))
		cp_say("%s: clang failed (exit status %d): see its messages above", opts->program,
		       WEXITSTATUS(status));
	else
		cp_say("%s: clang was killed by signal %d", opts->program, WTERMSIG(status));
	return CP_EXIT_USAGE;
}

/* One line per ring on stderr: printed, lost, short. */
static void report_rings(struct run_ctx *run)
{
	size_t i;

	for (i = 0; i < run->ring_count; i++) {
		struct ring_ctx *ring = &run->rings[i];
		struct cp_program_ring_info now;

		if (cp_program__ring(run->session->program, ring->index, &now))
			continue;
		if (now.lost_counted)
			fprintf(stderr, "cuprobe: ring %s: %llu records printed, %llu lost, %llu short\n",
				now.name, (unsigned long long)ring->printed,
				(unsigned long long)now.lost,
				(unsigned long long)ring->short_records);
		else
			fprintf(stderr, "cuprobe: ring %s: %llu records printed, losses not counted (write with cuprobe_ring_reserve/output), %llu short\n",
				now.name, (unsigned long long)ring->printed,
				(unsigned long long)ring->short_records);
		if (!now.type_id)
			cp_say("ring %s has no record type (CUPROBE_RING): records printed as hex", now.name);
		if (now.lost)
			cp_say("warning: %llu records of ring %s lost to a full ring",
			       (unsigned long long)now.lost, now.name);
		if (ring->short_records)
			cp_say("warning: %llu records of ring %s shorter than their type (%zu bytes) were not printed",
			       (unsigned long long)ring->short_records, now.name, now.record_size);
	}
}

/* A program found a kernel handle unnamed: the runtime names it in the map, if it can. */
static int on_name_request(void *arg, const void *data, size_t size)
{
	struct run_ctx *run = arg;

	pthread_mutex_lock(&run->lock);
	cp_tracer__answer_name_request(run->session->tracer, run->session->names, data, size);
	pthread_mutex_unlock(&run->lock);
	return 0;
}

/* PROG's rings, and after them the runtime's ring of name requests. */
static int set_up_rings(struct run_ctx *run, struct cp_session_ring **session_rings)
{
	const struct cp_program *program = run->session->program;
	size_t i, count = cp_program__ring_count(program);

	run->rings = calloc(count ? count : 1, sizeof(*run->rings));
	*session_rings = calloc(count + 1, sizeof(**session_rings));
	if (!run->rings || !*session_rings)
		return -ENOMEM;
	for (i = 0; i < count; i++) {
		struct ring_ctx *ring = &run->rings[i];

		ring->run = run;
		ring->index = i;
		if (cp_program__ring(program, i, &ring->info))
			return -EINVAL;
		(*session_rings)[i] = (struct cp_session_ring){ .fd = ring->info.fd,
								.on_record = on_record, .ctx = ring };
	}
	(*session_rings)[count] = (struct cp_session_ring){
		.fd = cp_tracer__name_request_fd(run->session->tracer),
		.on_record = on_name_request, .ctx = run };
	run->ring_count = count;
	return 0;
}

/*
 * --ptx: the module PROG's device programs go into the kernels as (map
 * addresses 0), to the output, as `bpftool prog dump jited` shows a
 * program. An exit status.
 */
static int print_ptx(struct cp_session *s, const struct cp_run_options *opts)
{
	char *ptx = NULL;
	int err;

	if (!cp_program__device_count(s->program)) {
		cp_say("%s: no device programs (SEC(\"gpu/GLOB\") or SEC(\"gpu.exit/GLOB\")): no PTX to print",
		       opts->program);
		return CP_EXIT_USAGE;
	}
	err = cp_program__ptx_module(s->program, &ptx);
	if (err) {
		cp_say("cannot make the PTX module: %s", strerror(-err));
		return CP_EXIT_SETUP;
	}
	err = cp_output__open(&s->output, opts->common.output, &s->identity);
	if (!err && !cp_output__write(&s->output, ptx, strlen(ptx), false))
		err = -errno;
	if (!err)
		err = cp_output__commit(&s->output);
	if (!err)
		err = -cp_output__close(&s->output);
	free(ptx);
	if (err) {
		cp_say("cannot write %s: %s", opts->common.output ? opts->common.output : "standard output",
		       err == -ELOOP ? "it is a symbolic link" : strerror(-err));
		return CP_EXIT_SETUP;
	}
	return 0;
}

int cp_cmd_run(const union cp_options *options)
{
	const struct cp_run_options *opts = &options->run;
	CP_OPTS(cp_tracer_opts, tracer_opts);
	struct cp_session_ring *session_rings = NULL;
	struct cp_wait_hooks hooks = { 0 };
	struct cp_device_run device = { .plan_fd = -1, .library_fd = -1, .report_fd = -1,
					.child_report_fd = -1 };
	struct run_ctx run = { 0 };
	uint64_t magic = 0;
	bool has_device = false;
	struct cp_session session;
	void *elf = NULL;
	size_t elf_size = 0;
	int exit_code;

	pthread_mutex_init(&run.lock, NULL);
	exit_code = cp_session__open(&session, &opts->common);
	if (!exit_code)
		exit_code = program_bytes(opts, &session.identity, &elf, &elf_size);
	if (exit_code)
		goto cleanup;
	/*
	 * cuprobe's own programs only where users' programs rely on them:
	 * kernel names, the current context's device, cuInit (system-wide
	 * targets), NCCL's communicators (their rank, size and id). No
	 * per-call records of its own.
	 */
	tracer_opts.families = 1ull << CP_FAMILY_name | 1ull << CP_FAMILY_context |
			       1ull << CP_FAMILY_init | 1ull << CP_FAMILY_nccl;
	tracer_opts.no_call_records = true;
	session.program_name = opts->program;
	/*
	 * Device programs: the one mode that puts code into a process, so a
	 * COMMAND's only, refused before anything is loaded otherwise. --ptx
	 * only prints them.
	 */
	has_device = !opts->ptx && cp_program__elf_has_device_programs(elf, elf_size) > 0;
	if (has_device && !opts->common.command) {
		cp_say("%s: device programs (gpu/ sections) run inside the kernels of a COMMAND only: cuprobe run PROG -- COMMAND (--ptx shows them)",
		       opts->program);
		exit_code = CP_EXIT_USAGE;
		goto cleanup;
	}
	if (has_device) {
		magic = cp_device__magic();
		cp_device__tracer_opts(&tracer_opts, magic);
	}
	session.program_elf = elf;
	session.program_size = elf_size;
	session.program_settings = opts->settings;
	session.program_setting_count = opts->setting_count;
	session.program_load_only = opts->ptx;
	exit_code = cp_session__attach(&session, &tracer_opts);
	if (!exit_code && opts->ptx)
		exit_code = print_ptx(&session, opts);
	if (!exit_code && has_device)
		exit_code = cp_device__prepare(&device, &session, magic, opts->common.format == CP_FORMAT_JSON, &run.lock);
	if (!exit_code && has_device)
		exit_code = cp_run_gpu_rings__open(&run.gpu_rings, &session, opts->common.format);
	device.on_instrumented = cp_run_gpu_rings__instrumented;
	device.on_instrumented_ctx = &run.gpu_rings;
	if (exit_code || opts->ptx)
		goto cleanup;
	run.session = &session;
	run.btf = cp_program__btf(session.program);
	run.format = opts->common.format;
	run.start_ns = monotonic_ns();
	run.max_entries = opts->max_entries_set ? opts->max_entries : RUN_MAX_ENTRIES;
	if (set_up_rings(&run, &session_rings)) {
		cp_say("out of memory");
		exit_code = CP_EXIT_SETUP;
		goto cleanup;
	}
	session.rings = session_rings;
	session.ring_count = run.ring_count + 1;
	run.path = (struct cp_record_path){ .on_settled = on_settled, .ctx = &run, .lock = &run.lock,
					    .forget_later = true };
	exit_code = cp_record_path__start(&run.path, &session);
	if (!exit_code && has_device)
		exit_code = cp_device__watch(&device);
	if (!exit_code)
		exit_code = cp_session__start_command(&session);
	if (has_device)
		cp_device__command_started(&device);
	if (exit_code)
		goto cleanup;
	hooks.tick_ms = opts->interval_ms;
	hooks.tick = on_tick;
	hooks.ctx = &run;
	/* Every record committed is printed first (the run drains), then the maps as they ended. */
	cp_session__run(&session, &hooks, "running %s", opts->program);
	pthread_mutex_lock(&run.lock);
	cp_run_gpu_rings__finish(&run.gpu_rings);
	pthread_mutex_unlock(&run.lock);
	print_maps(&run, true);
	if (run.not_printed)
		cp_say("%llu map entries not printed (at most %zu a map: --max-entries 0 prints them all)",
		       (unsigned long long)run.not_printed, run.max_entries);
	cp_session__warn_losses(&session);
	report_rings(&run);
	cp_session__report_files(&session, run.format);
	exit_code = cp_session__finish(&session);
	/* Matching kernels left without probes fail a run that would have succeeded. */
	if (has_device && cp_device__finish(&device) && !exit_code)
		exit_code = CP_EXIT_SETUP;
cleanup:
	cp_session__close(&session);
	cp_device__close(&device);
	cp_run_gpu_rings__close(&run.gpu_rings);
	cp_text__free(&run.text);
	free(run.rings);
	free(session_rings);
	free(elf);
	pthread_mutex_destroy(&run.lock);
	return exit_code;
}
