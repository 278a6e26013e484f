// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The record path on records no kernel wrote: cp_event__decode, then what a
 * tracing session does with each record it decodes (tools/record_path.c):
 * the names learn from it, every format writes it, the Chrome trace writer
 * takes it, the timeline observes it and each interval it settles is
 * written by every format and the Chrome trace; an Xid's kernels in flight
 * are written; an exit forgets its process.
 *
 * Input: records one after another, each a little-endian u16 length and
 * that many bytes (the last one cut where the input ends). Every JSON line
 * written must parse, and the Chrome trace be one JSON value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuprobe_internal.h"
#include "json_check.h"

struct path {
	struct cp_names *names;
	struct cp_chrome_trace *chrome;
	struct cp_timeline *timeline;
	struct cp_text text;   /* the formats' lines, JSON checked as written */
	struct cp_text chrome_text;
};

/* What a format appended to p->text since len: JSON checked, then dropped. */
static void written(struct path *p, enum cp_format format, size_t len)
{
	if (format == CP_FORMAT_JSON && p->text.len > len)
		json_check_lines(p->text.data + len, p->text.len - len);
	cp_text__clear(&p->text);
}

static void on_interval(void *ctx, const struct cp_gpu_interval *interval)
{
	struct path *p = ctx;
	enum cp_format f;

	for (f = 0; f < CP_FORMAT_MAX; f++) {
		cp_format__interval(&p->text, f, interval, p->names, 0);
		written(p, f, 0);
	}
	cp_chrome_trace__interval(p->chrome, interval, &p->chrome_text);
}

static void one_record(struct path *p, const union cp_event *event)
{
	struct cp_gpu_interval in_flight[8];
	char line[8192];
	enum cp_format f;
	size_t n;
	int len;

	cp_names__observe(p->names, event);
	for (f = 0; f < CP_FORMAT_MAX; f++) {
		len = cp_format__record(f, event, p->names, 0, line, sizeof(line));
		if (f == CP_FORMAT_JSON && len > 0)
			json_check_lines(line, (size_t)len);
	}
	cp_chrome_trace__record(p->chrome, event, &p->chrome_text);
	cp_timeline__observe(p->timeline, event);
	if (event->hdr.type == CP_EV_XID) {
		n = cp_timeline__in_flight(p->timeline, event->hdr.pid, in_flight, 8);
		for (f = 0; f < CP_FORMAT_MAX; f++) {
			cp_format__xid_in_flight(&p->text, f, &event->xid, in_flight, n < 8 ? n : 8,
						 true, p->names);
			written(p, f, 0);
		}
	}
	if (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT) {
		cp_chrome_trace__forget_pid(p->chrome, event->hdr.pid);
		cp_names__forget_pid(p->names, event->hdr.pid);
		cp_timeline__forget_pid(p->timeline, event->hdr.pid);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	CP_OPTS(cp_timeline_opts, opts);
	struct path p = { 0 };
	union cp_event event;

	p.names = cp_names__new(NULL);
	p.chrome = cp_chrome_trace__new(p.names, 0);
	opts.on_interval = on_interval;
	opts.ctx = &p;
	opts.max_pending = 64;
	p.timeline = cp_timeline__new(&opts);
	if (!p.names || !p.chrome || !p.timeline)
		abort();
	while (size >= 2) {
		size_t len = (size_t)data[0] | (size_t)data[1] << 8;

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		/* A copy of its own size: a read past the record is ASan's to see. */
		void *record = malloc(len ? len : 1);

		memcpy(record, data, len);
		if (!cp_event__decode(record, len, &event))
			one_record(&p, &event);
		free(record);
		data += len;
		size -= len;
	}
	cp_chrome_trace__finish(p.chrome, &p.chrome_text);
	if (!p.chrome_text.failed)
		json_check_document(p.chrome_text.data, p.chrome_text.len);
	cp_timeline__free(p.timeline);
	cp_chrome_trace__free(p.chrome);
	cp_names__free(p.names);
	cp_text__free(&p.text);
	cp_text__free(&p.chrome_text);
	return 0;
}
