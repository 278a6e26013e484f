// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe run's device programs (device.h). COMMAND gets the preload
 * library and the plan as memfds it inherits, named in its environment
 * (LD_PRELOAD=/proc/self/fd/N, CUPROBE_INJECT_PLAN=N): nothing is written
 * to the file system, so nothing is left behind, and the static cuprobe
 * carries the library inside itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cuprobe_internal.h"
#include "device.h"
#include "device/device.h"
#include "format/escape.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* Distinct kernels named this many times on stderr as they come; the rest in the summary's count. */
#define NAMES_SAID 20
#define SUMMARY_NAMES 8

#ifdef CUPROBE_HAVE_INJECT
/* libcuprobe_inject.so, linked into this binary (inject_library.c, generated). */
extern const unsigned char cp_inject_library[];
extern const unsigned char cp_inject_library_end[];
#endif

/* A set of kernel names (a tree of strings), and their first ones in order for the summary. */
struct cp_device_names {
	void *tree;
	size_t count;
	char *first[SUMMARY_NAMES];
};

static int by_string(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Adds name: true when it is new. */
static bool names_add(struct cp_device_names **set, const char *name)
{
	char *copy, **found;

	if (!*set && !(*set = calloc(1, sizeof(**set))))
		return false;
	copy = strdup(name);
	if (!copy)
		return false;
	found = tsearch(copy, &(*set)->tree, by_string);
	if (!found || *found != copy) {
		free(copy);
		return false;
	}
	if ((*set)->count < SUMMARY_NAMES)
		(*set)->first[(*set)->count] = copy;
	(*set)->count++;
	return true;
}

static void names_free(struct cp_device_names *set)
{
	if (!set)
		return;
	tdestroy(set->tree, free);
	free(set);
}

static size_t names_count(const struct cp_device_names *set)
{
	return set ? set->count : 0;
}

uint64_t cp_device__magic(void)
{
	uint64_t magic = 0;

	while (!magic)
		if (getrandom(&magic, sizeof(magic), 0) != sizeof(magic))
			magic = 0x6370726f62650000ull ^ (uint64_t)getpid(); /* "cprobe", still not 0 */
	return magic;
}

void cp_device__tracer_opts(struct cp_tracer_opts *tracer_opts, uint64_t magic)
{
	tracer_opts->launch_slots = CP_LAUNCH_SLOTS;
	tracer_opts->launch_slot_magic = magic;
	/*
	 * The launch probe writes each launch's seq into its slot; the syncs
	 * and blocking copies, streamed alone, say when to read device rings.
	 */
	if (tracer_opts->families)
		tracer_opts->families |= 1ull << CP_FAMILY_launch | 1ull << CP_FAMILY_sync |
					 1ull << CP_FAMILY_copy;
	tracer_opts->stream_proving = true;
}

/* A sealed memfd holding len bytes: COMMAND can read it, not change it. */
static int sealed_memfd(const char *name, const void *data, size_t len, bool exec)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | (exec ? MFD_EXEC : 0));
	size_t done = 0;
	ssize_t n;

	/* Kernels before 6.3 know no MFD_EXEC: their memfds are executable anyway. */
	if (fd < 0 && exec && errno == EINVAL)
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	while (done < len) {
		n = write(fd, (const char *)data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : -EIO;

			close(fd);
			return err;
		}
		done += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int cp_device__prepare(struct cp_device_run *d, struct cp_session *session, uint64_t magic,
		       bool json, pthread_mutex_t *lock)
{
	struct cp_device_plan_opts plan_opts;
	char error[512], *old_preload = getenv("LD_PRELOAD");
	int sockets[2], err;
	void *bytes = NULL;
	size_t len, i, n = 0;

	memset(d, 0, sizeof(*d));
	d->session = session;
	d->lock = lock;
	d->json = json;
	d->plan_fd = d->library_fd = d->report_fd = d->child_report_fd = -1;
#ifndef CUPROBE_HAVE_INJECT
	cp_say("%s: device programs: this cuprobe was built without them (no cuda.h at build time)",
	       session->program_name);
	return CP_EXIT_SETUP;
#else
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets)) {
		cp_say("cannot make the report socket: %s", strerror(errno));
		return CP_EXIT_SETUP;
	}
	d->report_fd = sockets[0];
	d->child_report_fd = sockets[1];
	/* The agent reads whatever is there and goes back to epoll. */
	fcntl(d->report_fd, F_SETFL, O_NONBLOCK);
	plan_opts = (struct cp_device_plan_opts){
		.magic = magic,
		.launch_slots_fd = cp_tracer__launch_slots_fd(session->tracer),
		.launch_slots = CP_LAUNCH_SLOTS,
		.report_fd = d->child_report_fd,
	};
	err = cp_device_plan__build(session->program, &plan_opts, &d->plan, error, sizeof(error));
	if (err) {
		cp_say("%s: %s", session->program_name, error);
		return CP_EXIT_USAGE;
	}
	err = cp_inject_plan__encode(&d->plan, &bytes, &len);
	if (!err) {
		err = d->plan_fd = sealed_memfd("cuprobe-plan", bytes, len, false);
		free(bytes);
	}
	if (err >= 0)
		err = d->library_fd = sealed_memfd("libcuprobe_inject.so", cp_inject_library,
						   (size_t)(cp_inject_library_end - cp_inject_library), true);
	if (err < 0) {
		cp_say("cannot hand the device programs to COMMAND: %s", strerror(-err));
		return CP_EXIT_SETUP;
	}
	if (asprintf(&d->env[0], "LD_PRELOAD=/proc/self/fd/%d%s%s", d->library_fd,
		     old_preload && *old_preload ? ":" : "", old_preload ? old_preload : "") < 0 ||
	    asprintf(&d->env[1], CP_INJECT_PLAN_ENV "=%d", d->plan_fd) < 0) {
		d->env[0] = d->env[1] = NULL;
		cp_say("out of memory");
		return CP_EXIT_SETUP;
	}
	d->inherit[n++] = d->library_fd;
	d->inherit[n++] = d->plan_fd;
	d->inherit[n++] = d->child_report_fd;
	d->inherit[n++] = plan_opts.launch_slots_fd;
	for (i = 0; i < d->plan.map_count; i++)
		d->inherit[n++] = d->plan.maps[i].fd;
	d->extras = (struct cp_child_extras){ .env = d->env, .fds = d->inherit, .fd_count = n };
	session->command_extras = &d->extras;
	return 0;
#endif
}

/* ---- reports ---------------------------------------------------------------------- */

/* The names of the programs in probes: "count, exits". */
static void program_names(const struct cp_device_run *d, uint64_t probes, char *out, size_t len)
{
	size_t i, used = 0;

	out[0] = '\0';
	for (i = 0; i < d->plan.program_count && used < len; i++)
		if (probes >> i & 1) {
			int n = snprintf(out + used, len - used, "%s%s", used ? ", " : "",
					 d->plan.programs[i].name);

			if (n > 0)
				used += (size_t)n;
		}
}

/* One JSON record into the output (a failed write stops the session). */
static void json_record(struct cp_device_run *d, const struct cp_inject_report *r, const char *programs)
{
	char name[4096], shown[4096], detail[2048], api[64], line[12288];
	int n;

	cp_demangle_name(r->name, shown, sizeof(shown));
	cp_json__escape(shown, name, sizeof(name));
	cp_json__escape(r->name, shown, sizeof(shown));
	cp_json__escape(r->detail, detail, sizeof(detail));
	cp_json__escape(r->api, api, sizeof(api));
	n = snprintf(line, sizeof(line),
		     "{\"type\":\"device\",\"event\":\"%s\",\"pid\":%u,\"kernel\":\"%s\",\"mangled\":\"%s\","
		     "\"api\":\"%s\",\"programs\":\"%s\",\"sm\":%u,\"detail\":\"%s\"}\n",
		     cp_inject_report__kind_name(r->kind), r->pid, name, shown, api, programs, r->arch,
		     detail);
	if (n > 0 && (size_t)n < sizeof(line) &&
	    !cp_output__write(&d->session->output, line, (size_t)n, true))
		cp_session__output_failed(d->session, errno);
}

static void handle_report(struct cp_device_run *d, const struct cp_inject_report *r)
{
	char programs[512], shown[4096], key[4352];
	bool fresh;

	program_names(d, r->probes, programs, sizeof(programs));
	cp_demangle_name(r->name, shown, sizeof(shown));
	if (r->kind != CP_INJECT_READY && r->kind != CP_INJECT_ERROR && r->kind != CP_INJECT_NOTE)
		d->seen |= r->probes;
	switch (r->kind) {
	case CP_INJECT_READY:
		d->ready++;
		if (cp_verbosity)
			cp_say("pid %u: device programs injected", r->pid);
		break;
	case CP_INJECT_INSTRUMENTED:
		if (d->on_instrumented)
			d->on_instrumented(d->on_instrumented_ctx, r->pid);
		if (names_add(&d->instrumented, shown) && cp_verbosity)
			cp_say("pid %u: %s: kernel %s instrumented (%s)%s%s", r->pid, r->api, shown,
			       programs, *r->detail ? ": " : "", r->detail);
		break;
	case CP_INJECT_NO_PTX:
	case CP_INJECT_REFUSED:
		d->failed = true;
		snprintf(key, sizeof(key), "%s\n%s", shown, r->detail);
		fresh = names_add(&d->not_instrumented, key);
		if (fresh && names_count(d->not_instrumented) <= NAMES_SAID)
			cp_say("not instrumentable: %s: %s (%s, pid %u)", r->detail, shown, r->api, r->pid);
		break;
	case CP_INJECT_NOTE:
		cp_say("pid %u: device programs: %s%s%s", r->pid, r->detail, *shown ? ": " : "", shown);
		break;
	case CP_INJECT_ERROR:
		d->failed = true;
		d->errors++;
		cp_say("pid %u: device programs: %s%s%s", r->pid, r->detail, *shown ? ": " : "", shown);
		break;
	default:
		break;
	}
	if (d->json && r->kind != CP_INJECT_READY)
		json_record(d, r, programs);
}

/* The report socket is readable: every message on it. 1 when every writer has gone. */
static int read_reports(void *ctx, int fd)
{
	struct cp_device_run *d = ctx;
	unsigned char buf[CP_INJECT_REPORT_MAX];
	char strings[CP_INJECT_REPORT_MAX];
	struct cp_inject_report r;
	ssize_t n;

	for (;;) {
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 0; /* EAGAIN: all read */
		if (n == 0)
			return 1;
		pthread_mutex_lock(d->lock);
		if (cp_inject_report__decode(buf, (size_t)n, &r, strings, sizeof(strings))) {
			d->errors++;
			d->failed = true;
			cp_say("a device program report from COMMAND is malformed (%zd bytes)", n);
		} else {
			handle_report(d, &r);
		}
		pthread_mutex_unlock(d->lock);
	}
}

int cp_device__watch(struct cp_device_run *d)
{
	int err = cp_agent__add_fd(d->session->agent, d->report_fd, read_reports, d);

	if (err) {
		cp_say("cannot watch the device programs' reports: %s", strerror(-err));
		return CP_EXIT_SETUP;
	}
	return 0;
}

void cp_device__command_started(struct cp_device_run *d)
{
	cp_fd__close(&d->child_report_fd);
}

/* "a, b, c and 4 more" */
static void name_list(const struct cp_device_names *set, char *out, size_t len, bool strip_reason)
{
	size_t i, used = 0, shown = set ? (set->count < SUMMARY_NAMES ? set->count : SUMMARY_NAMES) : 0;

	out[0] = '\0';
	for (i = 0; i < shown && used < len; i++) {
		const char *name = set->first[i];
		int n = snprintf(out + used, len - used, "%s%.*s", i ? ", " : "",
				 strip_reason ? (int)strcspn(name, "\n") : (int)strlen(name), name);

		if (n > 0)
			used += (size_t)n;
	}
	if (set && set->count > shown && used < len)
		snprintf(out + used, len - used, " and %zu more", set->count - shown);
}

bool cp_device__finish(struct cp_device_run *d)
{
	char list[2048];
	size_t i;

	pthread_mutex_lock(d->lock);
	if (!d->ready) {
		cp_say("device programs: COMMAND never loaded cuprobe's library (LD_PRELOAD refused, cleared, or its fds closed): nothing was instrumented");
		d->failed = true;
	}
	for (i = 0; d->ready && i < d->plan.program_count; i++) {
		struct cp_device_program_info info;

		if (d->seen >> i & 1)
			continue;
		if (cp_program__device(d->session->program, i, &info))
			info.section = d->plan.programs[i].glob;
		cp_say("gpu program %s: %s matched no kernel", d->plan.programs[i].name, info.section);
		d->failed = true;
	}
	name_list(d->instrumented, list, sizeof(list), false);
	cp_say("device programs: %zu kernel%s instrumented%s%s", names_count(d->instrumented),
	       names_count(d->instrumented) == 1 ? "" : "s", list[0] ? ": " : "", list);
	if (names_count(d->not_instrumented) > NAMES_SAID) {
		name_list(d->not_instrumented, list, sizeof(list), true);
		cp_say("not instrumentable: %zu kernels in all (%s)%s", names_count(d->not_instrumented),
		       list, d->json ? "" : "; --json lists each");
	}
	pthread_mutex_unlock(d->lock);
	return d->failed;
}

void cp_device__close(struct cp_device_run *d)
{
	size_t i;

	cp_fd__close(&d->plan_fd);
	cp_fd__close(&d->library_fd);
	cp_fd__close(&d->report_fd);
	cp_fd__close(&d->child_report_fd);
	for (i = 0; i < sizeof(d->env) / sizeof(d->env[0]); i++)
		free(d->env[i]);
	names_free(d->instrumented);
	names_free(d->not_instrumented);
	cp_inject_plan__release(&d->plan);
	if (d->session)
		d->session->command_extras = NULL;
	memset(d, 0, sizeof(*d));
	d->plan_fd = d->library_fd = d->report_fd = d->child_report_fd = -1;
}
