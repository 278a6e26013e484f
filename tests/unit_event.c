// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* cp_event__decode: the kernel's bytes are checked before anyone reads them. */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include "cuprobe.h"

static const struct {
	enum cp_event_type type;
	enum cp_api api;
	size_t size;
} kinds[] = {
	{ CP_EV_LAUNCH, CP_API_cuLaunchKernel, sizeof(struct cp_launch_event) },
	{ CP_EV_ALLOC, CP_API_cuMemAlloc_v2, sizeof(struct cp_alloc_event) },
	{ CP_EV_FREE, CP_API_cuMemFree_v2, sizeof(struct cp_free_event) },
	{ CP_EV_COPY, CP_API_cuMemcpyHtoD_v2, sizeof(struct cp_copy_event) },
	{ CP_EV_SYNC, CP_API_cuCtxSynchronize, sizeof(struct cp_sync_event) },
	{ CP_EV_NAME, CP_API_cuModuleGetFunction, sizeof(struct cp_name_event) },
	{ CP_EV_PROC, CP_API_sched_process_exit, sizeof(struct cp_proc_event) },
	{ CP_EV_RT_LAUNCH, CP_API_cudaLaunchKernel, sizeof(struct cp_rt_launch_event) },
};

/* A record of size bytes: header filled in, every other byte a pattern. */
static void make_record(unsigned char *buf, size_t size, __u32 type, __u32 api)
{
	struct cp_event_header hdr = { .type = type, .api = api, .pid = 4242, .tid = 4243,
				       .time_ns = 123456789 };
	size_t i;

	for (i = 0; i < size; i++)
		buf[i] = (unsigned char)(0x41 + i % 26);
	memcpy(buf, &hdr, sizeof(hdr) < size ? sizeof(hdr) : size);
	if (type == CP_EV_NAME && size >= sizeof(struct cp_name_event)) {
		struct cp_name_event *name = (struct cp_name_event *)buf;

		strcpy(name->name, "vec_add");
		name->name_len = 7;
	}
	if (type == CP_EV_PROC && size >= sizeof(struct cp_proc_event)) {
		struct cp_proc_event *proc = (struct cp_proc_event *)buf;

		memset(proc->comm, 0, sizeof(proc->comm));
		strcpy(proc->comm, "app");
	}
}

Test(event_decode, accepts_every_type_at_its_exact_size)
{
	unsigned char raw[sizeof(union cp_event) + 64];
	union cp_event out;
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		make_record(raw, kinds[i].size, kinds[i].type, kinds[i].api);
		memset(&out, 0xee, sizeof(out));
		cr_assert_eq(cp_event__decode(raw, kinds[i].size, &out), 0,
			     "type %d rejected at its size %zu", kinds[i].type, kinds[i].size);
		cr_assert_eq(out.hdr.type, kinds[i].type);
		cr_assert_eq(out.hdr.api, kinds[i].api);
		cr_assert_eq(out.hdr.pid, 4242);
		cr_assert_eq(out.hdr.tid, 4243);
		cr_assert_eq(out.hdr.time_ns, 123456789);
		/* The record's own bytes are copied as they were. */
		cr_assert_arr_eq(&out, raw, kinds[i].type == CP_EV_NAME ?
				 offsetof(struct cp_name_event, name) : kinds[i].size,
				 "type %d not copied verbatim", kinds[i].type);
	}
}

/* Every line of the record catalogue (CP_RECORD_TYPES): decoded at its struct's size, not a byte less. */
Test(event_decode, every_catalogued_type_at_its_struct_size)
{
	unsigned char raw[sizeof(union cp_event) + 64];
	union cp_event out;
	size_t types = 0;

#define CHECK(NAME, value, member, type, name) \
	make_record(raw, sizeof(struct type), CP_EV_##NAME, CP_API_UNKNOWN); \
	cr_assert_eq(cp_event__decode(raw, sizeof(struct type), &out), 0, #NAME " rejected"); \
	cr_assert_eq(cp_event__decode(raw, sizeof(struct type) - 1, &out), -EPROTO, \
		     #NAME " accepted a byte short"); \
	cr_assert_str_eq(cp_event_type__name(CP_EV_##NAME), name); \
	cr_assert_eq(sizeof(out.member), sizeof(struct type)); \
	types++;
	CP_RECORD_TYPES(CHECK)
#undef CHECK
	cr_assert_eq(types, CP_EV_TYPE_MAX - 1);
	make_record(raw, sizeof(raw), CP_EV_TYPE_MAX, CP_API_UNKNOWN);
	cr_assert_eq(cp_event__decode(raw, sizeof(raw), &out), -EPROTO);
}

Test(event_decode, rejects_records_shorter_than_their_type)
{
	unsigned char raw[sizeof(union cp_event)];
	union cp_event out;
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		make_record(raw, kinds[i].size, kinds[i].type, kinds[i].api);
		cr_assert_eq(cp_event__decode(raw, kinds[i].size - 1, &out), -EPROTO,
			     "type %d accepted one byte short", kinds[i].type);
		cr_assert_eq(cp_event__decode(raw, kinds[i].size - 8, &out), -EPROTO,
			     "type %d accepted 8 bytes short", kinds[i].type);
		cr_assert_eq(cp_event__decode(raw, sizeof(struct cp_event_header), &out), -EPROTO,
			     "type %d accepted as a bare header", kinds[i].type);
	}
	/* Shorter than a header: the type cannot even be read. */
	make_record(raw, sizeof(raw), CP_EV_LAUNCH, CP_API_cuLaunchKernel);
	cr_assert_eq(cp_event__decode(raw, sizeof(struct cp_event_header) - 1, &out), -EPROTO);
	cr_assert_eq(cp_event__decode(raw, 0, &out), -EPROTO);
	cr_assert_eq(cp_event__decode(NULL, sizeof(raw), &out), -EPROTO);
}

Test(event_decode, rejects_unknown_types)
{
	unsigned char raw[sizeof(union cp_event)];
	union cp_event out;
	__u32 bad[] = { 0, CP_EV_TYPE_MAX, CP_EV_TYPE_MAX + 1, 0xffffffffu };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		make_record(raw, sizeof(raw), bad[i], CP_API_cuLaunchKernel);
		cr_assert_eq(cp_event__decode(raw, sizeof(raw), &out), -EPROTO,
			     "type %u accepted", bad[i]);
	}
}

Test(event_decode, rejects_api_out_of_range)
{
	unsigned char raw[sizeof(union cp_event)];
	union cp_event out;

	make_record(raw, sizeof(struct cp_launch_event), CP_EV_LAUNCH, CP_API_MAX);
	cr_assert_eq(cp_event__decode(raw, sizeof(struct cp_launch_event), &out), -EPROTO);
	make_record(raw, sizeof(struct cp_launch_event), CP_EV_LAUNCH, CP_API_MAX + 7);
	cr_assert_eq(cp_event__decode(raw, sizeof(struct cp_launch_event), &out), -EPROTO);
	/* The last valid id still passes. */
	make_record(raw, sizeof(struct cp_proc_event), CP_EV_PROC, CP_API_MAX - 1);
	cr_assert_eq(cp_event__decode(raw, sizeof(struct cp_proc_event), &out), 0);
}

Test(event_decode, terminates_an_unterminated_name_and_clamps_its_length_and_a_process_name)
{
	struct cp_name_event raw;
	union cp_event out;

	memset(&raw, 0, sizeof(raw));
	raw.hdr.type = CP_EV_NAME;
	raw.hdr.api = CP_API_cuModuleGetFunction;
	raw.handle = 0x1234;
	memset(raw.name, 'k', sizeof(raw.name)); /* no NUL anywhere */
	raw.name_len = 100000;
	cr_assert_eq(cp_event__decode(&raw, sizeof(raw), &out), 0);
	cr_assert_eq(out.name.name[CP_NAME_MAX - 1], '\0');
	cr_assert_eq(strlen(out.name.name), CP_NAME_MAX - 1);
	cr_assert_eq(out.name.name_len, CP_NAME_MAX - 1);
	cr_assert_eq(out.name.handle, 0x1234);
	/* A lifecycle record's process name too. */
	memset(&raw, 'c', sizeof(raw));
	raw.hdr.type = CP_EV_PROC;
	raw.hdr.api = CP_API_sched_process_exit;
	cr_assert_eq(cp_event__decode(&raw, sizeof(struct cp_proc_event), &out), 0);
	cr_assert_eq(strlen(out.proc.comm), CP_COMM_MAX - 1);
}

Test(event_decode, name_len_follows_the_string_not_the_claim)
{
	struct cp_name_event raw;
	union cp_event out;

	memset(&raw, 0, sizeof(raw));
	raw.hdr.type = CP_EV_NAME;
	raw.hdr.api = CP_API_cuModuleGetFunction;
	strcpy(raw.name, "vec_add");
	raw.name_len = 300; /* longer than the string */
	cr_assert_eq(cp_event__decode(&raw, sizeof(raw), &out), 0);
	cr_assert_str_eq(out.name.name, "vec_add");
	cr_assert_eq(out.name.name_len, 7);
}

Test(event_names, every_type_and_api_has_a_name)
{
	int i;

	cr_assert_str_eq(cp_event_type__name(CP_EV_LAUNCH), "launch");
	cr_assert_str_eq(cp_event_type__name(CP_EV_RT_LAUNCH), "rt_launch");
	cr_assert_str_eq(cp_event_type__name((enum cp_event_type)0), "unknown");
	for (i = 1; i < CP_API_MAX; i++)
		cr_assert_str_neq(cp_api__name((enum cp_api)i), "unknown", "api %d has no name", i);
	cr_assert_str_eq(cp_api__name(CP_API_cuMemcpyDtoH_v2), "cuMemcpyDtoH_v2");
	cr_assert_str_eq(cp_api__name(CP_API_MAX), "unknown");
	cr_assert_str_eq(cp_copy_dir__name(CP_COPY_HTOD), "HtoD");
	cr_assert_str_eq(cp_mem_kind__name(CP_MEM_HOST), "host");
	cr_assert_str_eq(cp_sync_kind__name(CP_SYNC_STREAM), "stream");
}
