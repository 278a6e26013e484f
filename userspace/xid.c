// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Which process an Xid hit. The driver's tracepoint fires in whatever task
 * handles the fault (often a driver thread), and its message leaves the
 * process out; the same report in the kernel log names it: "NVRM: Xid
 * (PCI:0000:00:06): 31, pid=694, name=xid_fault, channel ...". So the tracer
 * reads /dev/kmsg from its start, and on an Xid record finds the log line
 * with the same code and message (waiting a moment for the log to catch up).
 * Every reader of an Xid record asks cp_xid__process which process it hit.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuprobe.h"
#include "tracer_internal.h"

#define KMSG_WAIT_MS 200

void cp_tracer__open_kmsg(struct cp_tracer *tracer)
{
	/* Only what is logged from now on: earlier Xids are not ours to attribute. */
	tracer->kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (tracer->kmsg_fd >= 0 && lseek(tracer->kmsg_fd, 0, SEEK_END) < 0) {
		close(tracer->kmsg_fd);
		tracer->kmsg_fd = -1;
	}
}

void cp_tracer__close_kmsg(struct cp_tracer *tracer)
{
	cp_fd__close(&tracer->kmsg_fd);
}

static long long elapsed_ms(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - since->tv_sec) * 1000ll + (now.tv_nsec - since->tv_nsec) / 1000000;
}

/* "...: 31, pid=694, name=xid_fault, channel ...": the pid when code and message match. */
static bool log_names(const char *line, const struct cp_xid_event *xid, uint32_t *pid)
{
	char code[32];
	const char *at = strstr(line, "NVRM: Xid (PCI:"), *p;
	unsigned long value;
	char *end;

	if (!at)
		return false;
	snprintf(code, sizeof(code), "): %u, pid=", xid->error_code);
	p = strstr(at, code);
	if (!p || (xid->msg[0] && !strstr(p, xid->msg)))
		return false;
	value = strtoul(p + strlen(code), &end, 10);
	if (end == p + strlen(code) || !value || value > UINT32_MAX)
		return false;
	*pid = (uint32_t)value;
	return true;
}

int cp_tracer__handle_xid(struct cp_tracer *tracer, struct cp_xid_event *xid)
{
	struct timespec start;
	char record[2048];
	ssize_t n;

	if (!tracer || !xid || xid->hdr.type != CP_EV_XID)
		return -EINVAL;
	xid->process = 0;
	if (tracer->kmsg_fd < 0)
		return -ENOENT;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		/* One record per read(2); EAGAIN when the log has nothing newer yet. */
		n = read(tracer->kmsg_fd, record, sizeof(record) - 1);
		if (n > 0) {
			record[n] = '\0';
			if (log_names(record, xid, &xid->process))
				return 0;
			continue;
		}
		if (n < 0 && errno == EPIPE)
			continue; /* records overwritten before we read them: go on with the next */
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (elapsed_ms(&start) >= KMSG_WAIT_MS)
			return -ENOENT;
		poll(&(struct pollfd){ .fd = tracer->kmsg_fd, .events = POLLIN }, 1, 20);
	}
}

/* The process an Xid hit: the kernel log's, else "pid=" in its message, else the task current then. */
uint32_t cp_xid__process(const struct cp_xid_event *xid)
{
	const char *at = xid ? strstr(xid->msg, "pid=") : NULL;
	unsigned long pid;
	char *end;

	if (!xid)
		return 0;
	if (xid->process)
		return xid->process;
	/* Some Xid messages name the process: "pid=1234, name=python, ...". */
	if (at) {
		pid = strtoul(at + 4, &end, 10);
		if (end != at + 4 && pid > 0 && pid <= UINT32_MAX)
			return (uint32_t)pid;
	}
	return xid->hdr.pid;
}
