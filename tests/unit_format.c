// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Output formats: JSON lines checked with a real parser (jansson), and text lines. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "cuprobe_internal.h"
#include "helpers.h"

static union cp_event blank(enum cp_event_type type, enum cp_api api)
{
	union cp_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = type;
	ev.hdr.api = api;
	ev.hdr.pid = 1234;
	ev.hdr.tid = 1240;
	ev.hdr.time_ns = 9000000123456789ull;
	return ev;
}

/* Formats ev as JSON, parses it, checks the common fields, returns the object. */
static json_t *to_json(const union cp_event *ev, const struct cp_names *names)
{
	char buf[8192];
	json_error_t error;
	json_t *obj;
	int n = cp_format__json(ev, names, buf, sizeof(buf));

	cr_assert_gt(n, 0, "cp_format__json returned %d", n);
	cr_assert_eq((size_t)n, strlen(buf), "the return is not the length written");
	cr_assert_null(strchr(buf, '\n'), "a JSON line must hold no newline: %s", buf);
	obj = json_loads(buf, JSON_REJECT_DUPLICATES, &error);
	cr_assert_not_null(obj, "not JSON (%s at %d): %s", error.text, error.position, buf);
	cr_assert(json_is_object(obj), "not an object: %s", buf);
	cr_assert_eq(jint(obj, "time_ns"), 9000000123456789ll);
	cr_assert_eq(jint(obj, "pid"), 1234);
	cr_assert_eq(jint(obj, "tid"), 1240);
	cr_assert_str_eq(jstr(obj, "type"), cp_event_type__name(ev->hdr.type));
	cr_assert_str_eq(jstr(obj, "api"), cp_api__name(ev->hdr.api));
	return obj;
}

Test(json, launch_named_and_unnamed)
{
	struct cp_names *names = cp_names__new(NULL);
	union cp_event ev = blank(CP_EV_LAUNCH, CP_API_cuLaunchKernel);
	json_t *obj;

	ev.launch.function = 0xffff800012345678ull; /* beyond 2^53: must stay exact */
	ev.launch.stream = 0x7f0000001000ull;
	ev.launch.grid[0] = 4; ev.launch.grid[1] = 2; ev.launch.grid[2] = 1;
	ev.launch.block[0] = 256; ev.launch.block[1] = 1; ev.launch.block[2] = 1;
	ev.launch.shared_mem_bytes = 4096;

	obj = to_json(&ev, names);
	cr_assert_str_eq(jstr(obj, "type"), "launch");
	cr_assert_eq(jhex(obj, "function"), 0xffff800012345678ull);
	cr_assert_eq(jhex(obj, "stream"), 0x7f0000001000ull);
	cr_assert(json_is_null(json_object_get(obj, "kernel")), "an unknown kernel must be null");
	cr_assert(json_is_null(json_object_get(obj, "mangled")));
	cr_assert(jdims_equal(obj, "grid", 4, 2, 1));
	cr_assert(jdims_equal(obj, "block", 256, 1, 1));
	cr_assert_eq(jint(obj, "shared_mem_bytes"), 4096);
	cr_assert_null(json_object_get(obj, "cooperative"));
	json_decref(obj);

	cr_assert_eq(cp_names__set(names, 1234, 0xffff800012345678ull, "_Z15rt_probe_kernelPfi"), 0);
	ev.launch.flags = CP_LAUNCH_COOPERATIVE | CP_LAUNCH_CONFIG_FAULT;
	obj = to_json(&ev, names);
	cr_assert_str_eq(jstr(obj, "kernel"), "rt_probe_kernel(float*, int)");
	cr_assert_str_eq(jstr(obj, "mangled"), "_Z15rt_probe_kernelPfi");
	cr_assert(json_is_true(json_object_get(obj, "cooperative")));
	cr_assert(json_is_true(json_object_get(obj, "config_unreadable")));
	json_decref(obj);
	cp_names__free(names);
}

/* Every digit count the hand-written number writer meets, exact. */
Test(json, numbers_at_digit_boundaries)
{
	static const uint32_t values[] = { 0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 4096, 99999,
					   100000, 1234567, 4294967295u };
	union cp_event ev = blank(CP_EV_LAUNCH, CP_API_cuLaunchKernel);
	size_t i;

	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint32_t v = values[i], w = values[(i + 5) % (sizeof(values) / sizeof(values[0]))];
		json_t *obj;

		ev.launch.grid[0] = v; ev.launch.grid[1] = w; ev.launch.grid[2] = 7;
		ev.launch.block[0] = w; ev.launch.block[1] = v; ev.launch.block[2] = 100;
		ev.launch.shared_mem_bytes = v;
		obj = to_json(&ev, NULL);
		cr_assert(jdims_equal(obj, "grid", v, w, 7), "grid (%u, %u, 7)", v, w);
		cr_assert(jdims_equal(obj, "block", w, v, 100), "block (%u, %u, 100)", w, v);
		cr_assert_eq(jint(obj, "shared_mem_bytes"), (long long)v);
		json_decref(obj);
	}
}

/* A name's escaped forms are made when it is learned, and again when its handle is reused. */
Test(json, hostile_and_replaced_names_stay_valid_json)
{
	static const char evil[] = "k\"\\\n\x1b[2J\x7f\xff";
	struct cp_names *names = cp_names__new(NULL);
	union cp_event ev = blank(CP_EV_LAUNCH, CP_API_cuLaunchKernel);
	json_t *obj;

	ev.launch.function = 0x5000;
	cr_assert_eq(cp_names__set(names, 1234, 0x5000, evil), 0);
	obj = to_json(&ev, names);
	cr_assert_str_eq(jstr(obj, "mangled"), "k\"\\\n\x1b[2J\x7f\u00ff");
	json_decref(obj);
	cr_assert_eq(cp_names__set(names, 1234, 0x5000, "_Z1fv"), 0);
	obj = to_json(&ev, names);
	cr_assert_str_eq(jstr(obj, "kernel"), "f()");
	cr_assert_str_eq(jstr(obj, "mangled"), "_Z1fv");
	json_decref(obj);
	cp_names__free(names);
}

Test(json, graph_launch)
{
	union cp_event ev = blank(CP_EV_LAUNCH, CP_API_cuGraphLaunch);
	json_t *obj;

	ev.launch.function = 0xabc0;
	ev.launch.stream = 0xdef0;
	ev.launch.flags = CP_LAUNCH_GRAPH;
	obj = to_json(&ev, NULL);
	cr_assert_eq(jhex(obj, "graph_exec"), 0xabc0);
	cr_assert_eq(jhex(obj, "stream"), 0xdef0);
	cr_assert_null(json_object_get(obj, "kernel"), "a graph launch has no kernel");
	json_decref(obj);
}

Test(json, alloc_and_free)
{
	union cp_event ev = blank(CP_EV_ALLOC, CP_API_cuMemAlloc_v2);
	json_t *obj;

	ev.alloc.ptr = 0x7f1200000000ull;
	ev.alloc.bytes = 1ull << 40;
	ev.alloc.kind = CP_MEM_DEVICE;
	obj = to_json(&ev, NULL);
	cr_assert_eq(jhex(obj, "ptr"), 0x7f1200000000ull);
	cr_assert_eq(jint(obj, "bytes"), 1ll << 40);
	cr_assert_str_eq(jstr(obj, "kind"), "device");
	cr_assert_eq(jint(obj, "result"), 0);
	cr_assert_null(json_object_get(obj, "stream"));
	json_decref(obj);

	ev = blank(CP_EV_ALLOC, CP_API_cuMemAllocAsync);
	ev.alloc.ptr = 0;
	ev.alloc.bytes = 64;
	ev.alloc.kind = CP_MEM_DEVICE_ASYNC;
	ev.alloc.stream = 0x5500;
	ev.alloc.result = 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "kind"), "device_async");
	cr_assert_eq(jhex(obj, "stream"), 0x5500);
	cr_assert_eq(jint(obj, "result"), 2);
	cr_assert_eq(jhex(obj, "ptr"), 0);
	json_decref(obj);

	ev = blank(CP_EV_FREE, CP_API_cuMemFreeHost);
	ev.free.ptr = 0x1000;
	ev.free.kind = CP_MEM_HOST;
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "type"), "free");
	cr_assert_eq(jhex(obj, "ptr"), 0x1000);
	cr_assert_str_eq(jstr(obj, "kind"), "host");
	json_decref(obj);
}

Test(json, copy_sync_proc)
{
	union cp_event ev = blank(CP_EV_COPY, CP_API_cuMemcpyDtoHAsync_v2);
	json_t *obj;

	ev.copy.dst = 0x10; ev.copy.src = 0x20; ev.copy.bytes = 4096;
	ev.copy.direction = CP_COPY_DTOH; ev.copy.async = 1; ev.copy.stream = 0x30;
	obj = to_json(&ev, NULL);
	cr_assert_eq(jhex(obj, "dst"), 0x10);
	cr_assert_eq(jhex(obj, "src"), 0x20);
	cr_assert_eq(jint(obj, "bytes"), 4096);
	cr_assert_str_eq(jstr(obj, "direction"), "DtoH");
	cr_assert(json_is_true(json_object_get(obj, "async")));
	cr_assert_eq(jhex(obj, "stream"), 0x30);
	json_decref(obj);

	ev.copy.async = 0;
	ev.copy.direction = CP_COPY_HTOD;
	obj = to_json(&ev, NULL);
	cr_assert(json_is_false(json_object_get(obj, "async")));
	cr_assert_str_eq(jstr(obj, "direction"), "HtoD");
	json_decref(obj);

	ev = blank(CP_EV_SYNC, CP_API_cuStreamSynchronize);
	ev.sync.kind = CP_SYNC_STREAM;
	ev.sync.handle = 0x4400;
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "kind"), "stream");
	cr_assert_eq(jhex(obj, "handle"), 0x4400);
	json_decref(obj);

	ev = blank(CP_EV_PROC, CP_API_sched_process_fork);
	ev.proc.kind = CP_PROC_FORK;
	ev.proc.child_pid = 5678;
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "kind"), "fork");
	cr_assert_eq(jint(obj, "child_pid"), 5678);
	json_decref(obj);

	ev = blank(CP_EV_PROC, CP_API_sched_process_exit);
	ev.proc.kind = CP_PROC_EXIT;
	ev.proc.exit_code = 7 << 8; /* wait status of exit(7) */
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "kind"), "exit");
	cr_assert_eq(jint(obj, "exit_status"), 7);
	cr_assert_null(json_object_get(obj, "signal"));
	json_decref(obj);

	ev.proc.exit_code = 9; /* killed by SIGKILL */
	obj = to_json(&ev, NULL);
	cr_assert_eq(jint(obj, "signal"), 9);
	cr_assert_null(json_object_get(obj, "exit_status"));
	json_decref(obj);

	ev = blank(CP_EV_PROC, CP_API_cuInit);
	ev.proc.kind = CP_PROC_CUDA_INIT;
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "kind"), "cuda_init");
	json_decref(obj);
}

Test(json, name_records)
{
	union cp_event ev = blank(CP_EV_NAME, CP_API_cuModuleGetFunction);
	json_t *obj;

	ev.name.handle = 0x9000;
	strcpy(ev.name.name, "_Z15rt_probe_kernelPfi");
	ev.name.name_len = strlen(ev.name.name);
	obj = to_json(&ev, NULL);
	cr_assert_eq(jhex(obj, "handle"), 0x9000);
	cr_assert_eq(jint(obj, "result"), 0);
	cr_assert_str_eq(jstr(obj, "name"), "rt_probe_kernel(float*, int)");
	cr_assert_str_eq(jstr(obj, "mangled"), "_Z15rt_probe_kernelPfi");
	cr_assert_null(json_object_get(obj, "source"), "a probe's name says no source");
	json_decref(obj);

	/* Read by the launch probe from the driver's record (a late attach): said so. */
	ev.hdr.api = CP_API_cuLaunchKernel;
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "mangled"), "_Z15rt_probe_kernelPfi");
	cr_assert_str_eq(jstr(obj, "source"), "driver_record");
	json_decref(obj);
	ev.hdr.api = CP_API_cuModuleGetFunction;

	/* A name with bytes JSON must escape still gives valid JSON, the same string back. */
	strcpy(ev.name.name, "we\"ird\\name\twith\x01" "ctl");
	ev.name.name_len = strlen(ev.name.name);
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "mangled"), "we\"ird\\name\twith\x01" "ctl");
	json_decref(obj);

	/* The longest name, all of it control bytes (6 bytes each once escaped). */
	memset(ev.name.name, 0x01, CP_NAME_MAX - 1);
	ev.name.name[CP_NAME_MAX - 1] = '\0';
	ev.name.name_len = CP_NAME_MAX - 1;
	obj = to_json(&ev, NULL);
	cr_assert_eq(strlen(jstr(obj, "mangled")), CP_NAME_MAX - 1);
	json_decref(obj);

	ev = blank(CP_EV_NAME, CP_API_cuKernelGetFunction);
	ev.name.handle = 0xb000;
	ev.name.alias_of = 0xa000;
	obj = to_json(&ev, NULL);
	cr_assert_eq(jhex(obj, "handle"), 0xb000);
	cr_assert_eq(jhex(obj, "alias_of"), 0xa000);
	json_decref(obj);
}

Test(json, rt_launch)
{
	struct cp_names *names = cp_names__new(NULL);
	union cp_event ev = blank(CP_EV_RT_LAUNCH, CP_API_cudaLaunchKernel);
	json_t *obj;

	ev.rt_launch.stub = 0x55aa00001000ull;
	ev.rt_launch.grid[0] = 2; ev.rt_launch.grid[1] = 1; ev.rt_launch.grid[2] = 1;
	ev.rt_launch.block[0] = 64; ev.rt_launch.block[1] = 1; ev.rt_launch.block[2] = 1;
	ev.rt_launch.shared_mem_bytes = 128;
	ev.rt_launch.stream = 0x77;
	obj = to_json(&ev, names);
	cr_assert_eq(jhex(obj, "stub"), 0x55aa00001000ull);
	cr_assert(json_is_null(json_object_get(obj, "kernel")));
	cr_assert(jdims_equal(obj, "grid", 2, 1, 1));
	cr_assert(jdims_equal(obj, "block", 64, 1, 1));
	cr_assert_eq(jint(obj, "shared_mem_bytes"), 128);
	cr_assert_eq(jhex(obj, "stream"), 0x77);
	json_decref(obj);
	cp_names__free(names);
}

Test(json, too_small_buffer)
{
	union cp_event ev = blank(CP_EV_LAUNCH, CP_API_cuLaunchKernel);
	char buf[8192];
	int full = cp_format__json(&ev, NULL, buf, sizeof(buf));

	cr_assert_gt(full, 0);
	cr_assert_eq(cp_format__json(&ev, NULL, buf, (size_t)full), -ENOSPC,
		     "no room for the NUL must be -ENOSPC");
	cr_assert_eq(cp_format__json(&ev, NULL, buf, 16), -ENOSPC);
	cr_assert_eq(cp_format__json(&ev, NULL, buf, (size_t)full + 1), full);
}

/* ---- cp_json__escape ------------------------------------------------------- */

/* Escapes src, checks that "<escaped>" parses as JSON, returns the escaped body. */
static const char *escape_checked(const char *src, char *buf, size_t len)
{
	char quoted[4096];
	json_error_t error;
	json_t *v;
	int n = cp_json__escape(src, buf, len);

	cr_assert_geq(n, 0, "cp_json__escape failed: %d", n);
	cr_assert_eq((size_t)n, strlen(buf));
	snprintf(quoted, sizeof(quoted), "\"%s\"", buf);
	v = json_loads(quoted, JSON_DECODE_ANY, &error);
	cr_assert_not_null(v, "escaped text is not a JSON string (%s): %s", error.text, quoted);
	cr_assert(json_is_string(v));
	json_decref(v);
	return buf;
}

Test(json_escape, quotes_backslashes_and_controls)
{
	char buf[512];
	json_t *v;
	char quoted[600];

	cr_assert_str_eq(escape_checked("plain_name", buf, sizeof(buf)), "plain_name");
	cr_assert_str_eq(escape_checked("a\"b", buf, sizeof(buf)), "a\\\"b");
	cr_assert_str_eq(escape_checked("a\\b", buf, sizeof(buf)), "a\\\\b");
	cr_assert_str_eq(escape_checked("l1\nl2\r\t", buf, sizeof(buf)), "l1\\nl2\\r\\t");
	cr_assert_str_eq(escape_checked("\x01\x1f", buf, sizeof(buf)), "\\u0001\\u001f");
	cr_assert_str_eq(escape_checked("", buf, sizeof(buf)), "");
	/* Round trip of every ASCII byte through a real parser. */
	char all[128];
	int i;

	for (i = 1; i < 128; i++)
		all[i - 1] = (char)i;
	all[127] = '\0';
	escape_checked(all, buf, sizeof(buf));
	snprintf(quoted, sizeof(quoted), "\"%s\"", buf);
	v = json_loads(quoted, JSON_DECODE_ANY, NULL);
	cr_assert_str_eq(json_string_value(v), all);
	json_decref(v);
}

/* Escapes src and decodes it again with jansson: the string a JSON reader gets. */
static char *round_trip(const char *src)
{
	char buf[1024], quoted[1100];
	json_t *v;
	char *decoded;

	escape_checked(src, buf, sizeof(buf));
	snprintf(quoted, sizeof(quoted), "\"%s\"", buf);
	v = json_loads(quoted, JSON_DECODE_ANY, NULL);
	cr_assert_not_null(v);
	decoded = strdup(json_string_value(v));
	json_decref(v);
	return decoded;
}

Test(json_escape, valid_utf8_is_kept_as_it_is)
{
	static const char *const valid[] = {
		"caf\xc3\xa9",                  /* é, U+00E9 */
		"\xc2\x80 \xdf\xbf",            /* U+0080, U+07FF: the 2-byte ends */
		"\xe0\xa0\x80 \xe2\x82\xac",    /* U+0800 (shortest 3-byte), € */
		"\xed\x9f\xbf \xee\x80\x80",    /* U+D7FF and U+E000, around the surrogates */
		"\xef\xbf\xbd",                 /* U+FFFD */
		"\xf0\x90\x80\x80 \xf0\x9d\x84\x9e", /* U+10000 (shortest 4-byte), U+1D11E */
		"\xf4\x8f\xbf\xbf",             /* U+10FFFF, the last code point */
		"\xe6\xbc\xa2\xe5\xad\x97<float>(\xce\xbb)",
	};
	char buf[256], *back;
	size_t i;

	for (i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		cr_assert_str_eq(escape_checked(valid[i], buf, sizeof(buf)), valid[i],
				 "valid UTF-8 was changed: %s", buf);
		back = round_trip(valid[i]);
		cr_assert_str_eq(back, valid[i], "jansson read back %s", back);
		free(back);
	}
	/* Escapes still apply around and between multi-byte characters. */
	cr_assert_str_eq(escape_checked("\xc3\xa9\"\xc3\xa9\x01\x7f", buf, sizeof(buf)),
			 "\xc3\xa9\\\"\xc3\xa9\\u0001\\u007f");

	/* And through an event: a module path and a kernel name come back whole. */
	union cp_event ev = blank(CP_EV_MODULE, CP_API_cuModuleLoad);
	json_t *obj;

	strcpy(ev.module.path, "/home/jos\xc3\xa9/\xe6\xa8\xa1\xe5\x9e\x8b.cubin");
	ev.module.path_len = strlen(ev.module.path);
	obj = to_json(&ev, NULL);
	cr_assert_str_eq(jstr(obj, "path"), ev.module.path);
	json_decref(obj);
}

Test(json_escape, bytes_outside_valid_utf8_become_escapes_of_their_value)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "\x80", "\\u0080" },                        /* lone continuation */
		{ "\xbf\xbf", "\\u00bf\\u00bf" },
		{ "\xff \xfe \xf5\x80\x80\x80", "\\u00ff \\u00fe \\u00f5\\u0080\\u0080\\u0080" },
		{ "\xc0\xaf", "\\u00c0\\u00af" },             /* overlong '/' */
		{ "\xc1\xbf", "\\u00c1\\u00bf" },             /* overlong U+007F */
		{ "\xe0\x80\xaf", "\\u00e0\\u0080\\u00af" },  /* overlong 3-byte */
		{ "\xf0\x8f\xbf\xbf", "\\u00f0\\u008f\\u00bf\\u00bf" }, /* overlong 4-byte */
		{ "\xed\xa0\x80", "\\u00ed\\u00a0\\u0080" },  /* U+D800, a surrogate */
		{ "\xed\xbf\xbf", "\\u00ed\\u00bf\\u00bf" },  /* U+DFFF */
		{ "\xf4\x90\x80\x80", "\\u00f4\\u0090\\u0080\\u0080" }, /* U+110000 */
		{ "ab\xe2\x82", "ab\\u00e2\\u0082" },          /* cut at the end */
		{ "\xe2x\xe2\x82y", "\\u00e2x\\u00e2\\u0082y" },/* cut by ASCII */
		{ "\xc3\xc3\xa9", "\\u00c3\xc3\xa9" },          /* a lead byte, then é */
		{ "\xf0\x9d\x84", "\\u00f0\\u009d\\u0084" },  /* 4-byte without its last */
	};
	char buf[256], *back;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert_str_eq(escape_checked(cases[i].in, buf, sizeof(buf)), cases[i].out,
				 "case %zu", i);
	}
	/* What a reader gets: each such byte as the code point of its value. */
	back = round_trip("a\xff" "b");
	cr_assert_str_eq(back, "a\xc3\xbf" "b");
	free(back);
	cr_assert_str_eq(escape_checked("\x7f", buf, sizeof(buf)), "\\u007f");
}

Test(json_escape, too_small_buffer)
{
	char buf[16];

	cr_assert_eq(cp_json__escape("abc", buf, 3), -ENOSPC, "no room for the NUL");
	cr_assert_eq(cp_json__escape("abc", buf, 4), 3);
	cr_assert_str_eq(buf, "abc");
	cr_assert_eq(cp_json__escape("\"", buf, 2), -ENOSPC, "half an escape must not fit");
	cr_assert_eq(cp_json__escape("\x01", buf, 6), -ENOSPC);
	cr_assert_eq(cp_json__escape("\x01", buf, 7), 6);
	cr_assert_eq(cp_json__escape("\xe2\x82\xac", buf, 3), -ENOSPC, "never half a character");
	cr_assert_eq(cp_json__escape("\xe2\x82\xac", buf, 4), 3);
	cr_assert_eq(cp_json__escape("x", buf, 0), -EINVAL);
}

/* ---- text ------------------------------------------------------------------ */

Test(text, launch_line)
{
	struct cp_names *names = cp_names__new(NULL);
	union cp_event ev = blank(CP_EV_LAUNCH, CP_API_cuLaunchKernel);
	char buf[1024];
	int n;

	ev.launch.function = 0x5000;
	ev.launch.stream = 0x6000;
	ev.launch.grid[0] = 4; ev.launch.grid[1] = 1; ev.launch.grid[2] = 1;
	ev.launch.block[0] = 256; ev.launch.block[1] = 1; ev.launch.block[2] = 1;
	cp_names__set(names, 1234, 0x5000, "_Z7vec_addPKfS0_Pfi");
	n = cp_format__text(&ev, names, ev.hdr.time_ns - 1500000000ull, buf, sizeof(buf));
	cr_assert_gt(n, 0);
	cr_assert_eq((size_t)n, strlen(buf));
	cr_assert_not_null(strstr(buf, "vec_add(float const*, float const*, float*, int)"), "%s", buf);
	cr_assert_not_null(strstr(buf, "grid=(4,1,1)"), "%s", buf);
	cr_assert_not_null(strstr(buf, "block=(256,1,1)"), "%s", buf);
	cr_assert_not_null(strstr(buf, "stream=0x6000"), "%s", buf);
	cr_assert_not_null(strstr(buf, "cuLaunchKernel"), "%s", buf);
	cr_assert_not_null(strstr(buf, "1234"), "%s", buf);
	cr_assert_not_null(strstr(buf, "1240"), "%s", buf);
	cr_assert_not_null(strstr(buf, "1.500000"), "relative time missing: %s", buf);
	cr_assert_null(strchr(buf, '\n'));

	ev.launch.function = 0x5001;
	n = cp_format__text(&ev, names, 0, buf, sizeof(buf));
	cr_assert_gt(n, 0);
	cr_assert_not_null(strstr(buf, "0x5001"), "an unnamed launch shows its handle: %s", buf);
	cr_assert_null(strstr(buf, "vec_add"), "%s", buf);
	cr_assert_eq(cp_format__text(&ev, names, 0, buf, 20), -ENOSPC);
	cp_names__free(names);
}

Test(text, other_records)
{
	union cp_event ev = blank(CP_EV_ALLOC, CP_API_cuMemAlloc_v2);
	char buf[1024];

	ev.alloc.ptr = 0xabc000;
	ev.alloc.bytes = 12288;
	ev.alloc.kind = CP_MEM_DEVICE;
	cr_assert_gt(cp_format__text(&ev, NULL, 0, buf, sizeof(buf)), 0);
	cr_assert_not_null(strstr(buf, "bytes=12288"), "%s", buf);
	cr_assert_not_null(strstr(buf, "0xabc000"), "%s", buf);
	cr_assert_not_null(strstr(buf, "device"), "%s", buf);

	ev = blank(CP_EV_COPY, CP_API_cuMemcpyDtoD_v2);
	ev.copy.bytes = 4096;
	ev.copy.direction = CP_COPY_DTOD;
	cr_assert_gt(cp_format__text(&ev, NULL, 0, buf, sizeof(buf)), 0);
	cr_assert_not_null(strstr(buf, "DtoD"), "%s", buf);
	cr_assert_not_null(strstr(buf, "bytes=4096"), "%s", buf);

	ev = blank(CP_EV_PROC, CP_API_sched_process_exit);
	ev.proc.kind = CP_PROC_EXIT;
	ev.proc.exit_code = 3 << 8;
	cr_assert_gt(cp_format__text(&ev, NULL, 0, buf, sizeof(buf)), 0);
	cr_assert_not_null(strstr(buf, "status=3"), "%s", buf);

	ev = blank(CP_EV_NAME, CP_API_cuModuleGetFunction);
	ev.name.handle = 0x42;
	strcpy(ev.name.name, "_Z15rt_probe_kernelPfi");
	ev.name.name_len = strlen(ev.name.name);
	cr_assert_gt(cp_format__text(&ev, NULL, 0, buf, sizeof(buf)), 0);
	cr_assert_not_null(strstr(buf, "rt_probe_kernel(float*, int)"), "%s", buf);

	cr_assert_not_null(strstr(cp_format__text_header(), "PID"));
	cr_assert_not_null(strstr(cp_format__text_header(), "API"));
}

/* The detail part of a text line (after the fixed header columns), exactly. */
static const char *text_details(const union cp_event *ev, char *buf, size_t len)
{
	/* 123.456789 s after the start */
	int n = cp_format__text(ev, NULL, ev->hdr.time_ns - 123456789000ull, buf, len);

	cr_assert_gt(n, 0, "cp_format__text returned %d", n);
	cr_assert_eq((size_t)n, strlen(buf), "the return is not the length written");
	/* "%5llu.%06llu %7u %7u %-26s" is 5 + 1 + 6 + 1 + 7 + 1 + 7 + 1 + 26 = 55 columns. */
	cr_assert_geq(strlen(buf), 55, "%s", buf);
	return buf + 55;
}

Test(text, alloc_copy_sync_details_exactly)
{
	union cp_event ev = blank(CP_EV_ALLOC, CP_API_cuMemAlloc_v2);
	char buf[1024];

	ev.alloc.ptr = 0; ev.alloc.bytes = 10; ev.alloc.kind = CP_MEM_DEVICE; ev.alloc.result = 2;
	cr_assert_str_eq(text_details(&ev, buf, sizeof(buf)), " ptr=0x0 bytes=10 kind=device failed=2");
	cr_assert_str_eq(buf, "  123.456789    1234    1240 cuMemAlloc_v2" "             "
			      " ptr=0x0 bytes=10 kind=device failed=2");

	ev = blank(CP_EV_COPY, CP_API_cuMemcpyHtoDAsync_v2);
	ev.copy.direction = CP_COPY_HTOD; ev.copy.bytes = 18446744073709551615ull;
	ev.copy.dst = 0xffffffffffffffffull; ev.copy.src = 0xa0; ev.copy.async = 1;
	ev.copy.stream = 0x7f00; ev.copy.count = 3;
	cr_assert_str_eq(text_details(&ev, buf, sizeof(buf)),
			 " HtoD bytes=18446744073709551615 dst=0xffffffffffffffff src=0xa0"
			 " stream=0x7f00 count=3");

	ev = blank(CP_EV_SYNC, CP_API_cuStreamQuery);
	ev.sync.kind = CP_SYNC_QUERY_STREAM; ev.sync.handle = 0x99; ev.sync.result = 600;
	ev.sync.entry_ns = ev.hdr.time_ns - 1234567;
	cr_assert_str_eq(text_details(&ev, buf, sizeof(buf)),
			 " stream_query=0x99 result=600 waited=1234us");

	ev = blank(CP_EV_SYNC, CP_API_cuCtxSynchronize);
	ev.sync.kind = CP_SYNC_CONTEXT; ev.sync.result = -5; ev.sync.entry_ns = ev.hdr.time_ns + 1;
	cr_assert_str_eq(text_details(&ev, buf, sizeof(buf)), " context result=-5 waited=0us");
}

Test(json, sync_fields_exactly)
{
	union cp_event ev = blank(CP_EV_SYNC, CP_API_cuEventSynchronize);
	char buf[1024];

	ev.sync.kind = CP_SYNC_EVENT; ev.sync.handle = 0xe0; ev.sync.result = 0; ev.sync.device = -1;
	ev.sync.entry_ns = ev.hdr.time_ns - 5000;
	cr_assert_gt(cp_format__json(&ev, NULL, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "{\"time_ns\":9000000123456789,\"pid\":1234,\"tid\":1240,"
			      "\"type\":\"sync\",\"api\":\"cuEventSynchronize\",\"kind\":\"event\","
			      "\"handle\":\"0xe0\",\"entry_ns\":9000000123451789,\"waited_ns\":5000,"
			      "\"result\":0,\"device\":-1}");
}

/* No byte of line is a control character: it stays one line and cannot drive a terminal. */
static void assert_no_control_bytes(const char *line)
{
	const unsigned char *p;

	for (p = (const unsigned char *)line; *p; p++)
		cr_assert(*p >= 0x20 && *p != 0x7f, "control byte %#x in text line: %s", *p, line);
}

Test(text, control_bytes_in_names_and_paths_are_escaped)
{
	/* A newline, an ANSI "clear screen" and DEL, as a hostile name could carry them. */
	static const char evil[] = "k\nfake 1 2 cuLaunchKernel\x1b[2J\x7f\t";
	static const char shown[] = "k\\x0afake 1 2 cuLaunchKernel\\x1b[2J\\x7f\\x09";
	struct cp_names *names = cp_names__new(NULL);
	union cp_event ev;
	char buf[2048];

	ev = blank(CP_EV_LAUNCH, CP_API_cuLaunchKernel);
	ev.launch.function = 0x5000;
	cr_assert_eq(cp_names__set(names, 1234, 0x5000, evil), 0);
	cr_assert_gt(cp_format__text(&ev, names, 0, buf, sizeof(buf)), 0);
	assert_no_control_bytes(buf);
	cr_assert_not_null(strstr(buf, shown), "%s", buf);
	cr_assert_not_null(strstr(buf, "grid=("), "the rest of the line is still there: %s", buf);

	ev = blank(CP_EV_NAME, CP_API_cuModuleGetFunction);
	ev.name.handle = 0x42;
	strcpy(ev.name.name, evil);
	ev.name.name_len = strlen(ev.name.name);
	cr_assert_gt(cp_format__text(&ev, NULL, 0, buf, sizeof(buf)), 0);
	assert_no_control_bytes(buf);
	cr_assert_not_null(strstr(buf, shown), "%s", buf);

	ev = blank(CP_EV_MODULE, CP_API_cuModuleLoad);
	strcpy(ev.module.path, "/tmp/a\nb\x1b]0;title\x07.cubin");
	ev.module.path_len = strlen(ev.module.path);
	cr_assert_gt(cp_format__text(&ev, NULL, 0, buf, sizeof(buf)), 0);
	assert_no_control_bytes(buf);
	cr_assert_not_null(strstr(buf, "path=/tmp/a\\x0ab\\x1b]0;title\\x07.cubin"), "%s", buf);

	ev = blank(CP_EV_ATTACH, CP_API_driver_mapped);
	strcpy(ev.attach.name, "libcuda.so.1\r\x1b[K");
	ev.attach.status = CP_ATTACH_COVERED;
	cr_assert_gt(cp_format__text(&ev, NULL, 0, buf, sizeof(buf)), 0);
	assert_no_control_bytes(buf);
	cr_assert_not_null(strstr(buf, " libcuda.so.1\\x0d\\x1b[K "), "%s", buf);

	/* UTF-8 and other bytes from 0x80 pass through unchanged. */
	ev = blank(CP_EV_MODULE, CP_API_cuModuleLoad);
	strcpy(ev.module.path, "/home/jos\xc3\xa9/m.cubin");
	ev.module.path_len = strlen(ev.module.path);
	cr_assert_gt(cp_format__text(&ev, NULL, 0, buf, sizeof(buf)), 0);
	cr_assert_not_null(strstr(buf, "path=/home/jos\xc3\xa9/m.cubin"), "%s", buf);
	cp_names__free(names);
}

/* Every record type of the catalogue has a writer in both formats: more than the common part. */
Test(formats, every_record_type_is_written_in_every_format)
{
	char buf[8192], common[256];
	int n;

#define CHECK(NAME, value, member, type, name) \
	{ \
		union cp_event ev = blank(CP_EV_##NAME, CP_API_UNKNOWN); \
		json_t *obj; \
\
		ev.proc.kind = CP_EV_##NAME == CP_EV_PROC ? CP_PROC_EXIT : ev.proc.kind; \
		obj = to_json(&ev, NULL); \
		cr_assert_gt(json_object_size(obj), 5, #NAME ": no fields of its own in JSON"); \
		json_decref(obj); \
		n = cp_format__text(&ev, NULL, 0, buf, sizeof(buf)); \
		snprintf(common, sizeof(common), "%5u.%06u %7u %7u %-26s", 9000000, 123456, 1234, \
			 1240, "unknown"); \
		cr_assert_gt(n, (int)strlen(common), #NAME ": no details in text: %s", buf); \
		cr_assert_eq(strncmp(buf, common, strlen(common)), 0, "%s", buf); \
	}
	CP_RECORD_TYPES(CHECK)
#undef CHECK
}


/* Sizes for a person: the reports' form, and top's compact one. */
Test(formats, bytes_for_a_person)
{
	char buf[32];

	cr_assert_str_eq(cp_format__bytes(512, false, buf, sizeof(buf)), "512 B");
	cr_assert_str_eq(cp_format__bytes(512, true, buf, sizeof(buf)), "512");
	cr_assert_str_eq(cp_format__bytes(1536, false, buf, sizeof(buf)), "1.50 KiB");
	cr_assert_str_eq(cp_format__bytes(1536, true, buf, sizeof(buf)), "1.5K");
	cr_assert_str_eq(cp_format__bytes(5ull << 20, false, buf, sizeof(buf)), "5.00 MiB");
	cr_assert_str_eq(cp_format__bytes(3ull << 30, true, buf, sizeof(buf)), "3.0G");
}

/* An NCCL record, exactly, in both formats; a launch made inside it names its seq. */
Test(formats, nccl_record_and_its_launch)
{
	union cp_event ev = blank(CP_EV_NCCL, CP_API_ncclReduce);
	char buf[2048];

	ev.nccl.entry_ns = ev.hdr.time_ns - 25000;
	ev.nccl.op = CP_NCCL_REDUCE;
	ev.nccl.seq = 12;
	ev.nccl.group = 10;
	ev.nccl.comm = 0xc0;
	ev.nccl.comm_id = 0xfeed;
	ev.nccl.count = 1024;
	ev.nccl.datatype = 4;
	ev.nccl.bytes = 8192;
	ev.nccl.redop = 2;
	ev.nccl.root = 1;
	ev.nccl.rank = 0;
	ev.nccl.nranks = 2;
	ev.nccl.device = 0;
	ev.nccl.stream = 0x5a;
	ev.nccl.launches = 1;
	cr_assert_gt(cp_format__json(&ev, NULL, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "{\"time_ns\":9000000123456789,\"pid\":1234,\"tid\":1240,"
			      "\"type\":\"nccl\",\"api\":\"ncclReduce\",\"op\":\"reduce\",\"seq\":12,"
			      "\"group\":10,\"comm\":\"0xc0\",\"comm_id\":\"0xfeed\",\"rank\":0,\"nranks\":2,"
			      "\"device\":0,\"count\":1024,\"datatype\":\"int64\",\"bytes\":8192,"
			      "\"redop\":\"max\",\"root\":1,\"stream\":\"0x5a\",\"launches\":1,"
			      "\"copies\":0,\"entry_ns\":9000000123431789,\"duration_ns\":25000,\"result\":0}");
	cr_assert_str_eq(text_details(&ev, buf, sizeof(buf)),
			 " reduce count=1024 int64 bytes=8192 op=max root=1 stream=0x5a comm=0xc0"
			 " rank=0/2 id=0xfeed device=0 seq=12 group=10 launches=1 took=25us");
	/* A send names its peer; a communicator call no data fields. */
	ev = blank(CP_EV_NCCL, CP_API_ncclSend);
	ev.nccl.op = CP_NCCL_SEND;
	ev.nccl.root = 3;
	ev.nccl.datatype = 99;
	ev.nccl.flags = CP_NCCL_BAD_DATATYPE | CP_NCCL_COMM_UNKNOWN;
	ev.nccl.rank = ev.nccl.nranks = ev.nccl.device = -1;
	ev.nccl.entry_ns = ev.hdr.time_ns;
	{
		json_t *obj = to_json(&ev, NULL);

		cr_assert_eq(jint(obj, "peer"), 3);
		cr_assert_null(json_object_get(obj, "root"));
		cr_assert_str_eq(jstr(obj, "datatype"), "unknown");
		cr_assert(json_is_true(json_object_get(obj, "bad_datatype")));
		cr_assert(json_is_true(json_object_get(obj, "comm_unknown")));
		json_decref(obj);
	}
	ev = blank(CP_EV_NCCL, CP_API_ncclCommSplit);
	ev.nccl.op = CP_NCCL_COMM_SPLIT;
	ev.nccl.comm = 0xd0;
	ev.nccl.parent = 0xc0;
	ev.nccl.rank = ev.nccl.nranks = -1;
	ev.nccl.device = 0;
	ev.nccl.entry_ns = ev.hdr.time_ns - 1000;
	ev.nccl.seq = 3;
	cr_assert_str_eq(text_details(&ev, buf, sizeof(buf)),
			 " comm_split comm=0xd0 device=0 parent=0xc0 seq=3 took=1us");
	{
		json_t *obj = to_json(&ev, NULL);

		cr_assert_null(json_object_get(obj, "bytes"), "no data fields for a communicator call");
		cr_assert_str_eq(jstr(obj, "parent"), "0xc0");
		json_decref(obj);
	}
	ev = blank(CP_EV_LAUNCH, CP_API_cuLaunchKernelEx);
	ev.launch.function = 0x1;
	ev.launch.nccl_call = 12;
	{
		json_t *obj = to_json(&ev, NULL);

		cr_assert_eq(jint(obj, "nccl_call"), 12);
		json_decref(obj);
	}
	cr_assert(strstr(text_details(&ev, buf, sizeof(buf)), " nccl=12"), "%s", buf);
}

/* A device ring's end-of-run counts: one JSON line, per launch; a ring's name escaped. */
Test(json, device_ring_summary_per_launch)
{
	struct cp_device_ring_launch launches[] = { { 1, 16, 16 }, { 2, 0, 32 } };
	struct cp_device_ring_summary summary = {
		.ring = "warp\"exits", .produced = 64, .delivered = 16, .lost = 48,
		.launches = launches, .launch_count = 2 };
	struct cp_text text = { 0 };
	json_error_t error;
	json_t *obj, *l;

	cr_assert_eq(cp_format__device_ring_summary(&text, &summary), 0);
	cr_assert_eq(text.data[text.len - 1], '\n');
	cr_assert_null(memchr(text.data, '\n', text.len - 1), "%s", text.data);
	obj = json_loadb(text.data, text.len, JSON_REJECT_DUPLICATES, &error);
	cr_assert_not_null(obj, "%s: %s", error.text, text.data);
	cr_expect_str_eq(jstr(obj, "type"), "device_ring");
	cr_expect_str_eq(jstr(obj, "ring"), "warp\"exits");
	cr_expect(jint(obj, "produced") == 64 && jint(obj, "delivered") == 16 &&
		  jint(obj, "lost") == 48 && jint(obj, "abandoned") == 0 && jint(obj, "pending") == 0);
	cr_assert_eq(json_array_size(json_object_get(obj, "launches")), 2);
	l = json_array_get(json_object_get(obj, "launches"), 1);
	cr_expect(jint(l, "launch_seq") == 2 && jint(l, "delivered") == 0 && jint(l, "lost") == 32);
	json_decref(obj);
	cp_text__free(&text);
}
