/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cuprobe run's device programs (SEC("gpu/GLOB"), SEC("gpu.exit/GLOB")):
 * the only mode that puts code into a process. The plan and the preload
 * library (embedded in this binary) handed to COMMAND as inherited memfds,
 * and what COMMAND's library reports, printed as it comes and summed up at
 * the end.
 */
#ifndef CUPROBE_TOOLS_DEVICE_H
#define CUPROBE_TOOLS_DEVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "device/inject_protocol.h"
#include "session.h"
#include "spawn.h"

struct cp_device_names;

struct cp_device_run {
	struct cp_session *session;
	pthread_mutex_t *lock;       /* the command's output lock: reports print on the agent thread */
	bool json;
	struct cp_inject_plan plan;
	int plan_fd, library_fd, report_fd, child_report_fd;
	char *env[3];
	int inherit[4 + CP_INJECT_MAX_MAPS];
	struct cp_child_extras extras;
	/* What COMMAND reported. */
	uint64_t seen;               /* bit i: program i matched a kernel (instrumented or not) */
	unsigned long ready, errors;
	struct cp_device_names *instrumented, *not_instrumented;
	bool failed;                 /* something matching was not instrumented: exit 1 */
	/* A process got instrumented kernels (it may write device rings now); may be NULL. */
	void (*on_instrumented)(void *ctx, uint32_t pid);
	void *on_instrumented_ctx;
};

/* The tracer options device programs need (launch slots, the launch probe); magic: the session's. */
void cp_device__tracer_opts(struct cp_tracer_opts *tracer_opts, uint64_t magic);
/* A random magic for launch slot headers (never 0). */
uint64_t cp_device__magic(void);

/*
 * After PROG is loaded: the plan (device programs translated, their maps
 * checked), the memfds, the report socket and COMMAND's environment, in
 * session->command_extras. 0, or the exit code after saying why.
 */
int cp_device__prepare(struct cp_device_run *d, struct cp_session *session, uint64_t magic,
		       bool json, pthread_mutex_t *lock);
/* Once the agent runs: its epoll watches the report socket. 0 or an exit code. */
int cp_device__watch(struct cp_device_run *d);
/* COMMAND started: its end of the socket is its own now. */
void cp_device__command_started(struct cp_device_run *d);
/* After the agent stopped: globs that matched nothing, the summary. True when the run failed. */
bool cp_device__finish(struct cp_device_run *d);
void cp_device__close(struct cp_device_run *d);

#endif
