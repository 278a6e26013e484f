// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The seeds of fuzz_record (make_seeds.sh): records laid out as cuprobe_events.h says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuprobe.h"

static FILE *out;
static void put(const void *rec, size_t size)
{
	unsigned char len[2] = { size & 0xff, size >> 8 };
	fwrite(len, 1, 2, out);
	fwrite(rec, 1, size, out);
}
#define HDR(r, T, API, PID, TID, T_NS) do { memset(&(r), 0, sizeof(r)); (r).hdr.type = T; (r).hdr.api = API; (r).hdr.pid = PID; (r).hdr.tid = TID; (r).hdr.time_ns = T_NS; } while (0)

static void process(uint32_t pid, uint64_t t)
{
	struct cp_proc_event p; struct cp_name_event n; struct cp_launch_event l; struct cp_sync_event s;
	struct cp_return_event r; struct cp_alloc_event a; struct cp_copy_event c; struct cp_free_event f;
	struct cp_event_event e; struct cp_xid_event x; struct cp_rt_launch_event rt;
	HDR(p, CP_EV_PROC, 0, pid, pid, t); p.kind = CP_PROC_CUDA_INIT; put(&p, sizeof(p));
	HDR(n, CP_EV_NAME, 0, pid, pid, t + 10); n.handle = 0x1000; strcpy(n.name, "_Z6vecAddPfS_S_i"); n.name_len = strlen(n.name); put(&n, sizeof(n));
	HDR(a, CP_EV_ALLOC, 0, pid, pid, t + 20); a.ptr = 0x7f0000000000; a.bytes = 1 << 20; put(&a, sizeof(a));
	HDR(c, CP_EV_COPY, 0, pid, pid, t + 30); c.dst = a.ptr; c.src = 0x5000; c.bytes = 4096; c.direction = 1; c.count = 1; put(&c, sizeof(c));
	for (int i = 0; i < 3; i++) {
		HDR(l, CP_EV_LAUNCH, 0, pid, pid + i, t + 40 + i); l.function = 0x1000; l.stream = 7; l.grid[0] = 64; l.grid[1] = l.grid[2] = 1; l.block[0] = 256; l.block[1] = l.block[2] = 1; l.device = 0; put(&l, sizeof(l));
		HDR(r, CP_EV_RETURN, 0, pid, pid + i, t + 45 + i); r.entry_ns = t + 40 + i; put(&r, sizeof(r));
	}
	HDR(e, CP_EV_EVENT, 0, pid, pid, t + 50); e.event = 0x42; e.stream = 7; e.op = 1; put(&e, sizeof(e));
	HDR(s, CP_EV_SYNC, 0, pid, pid, t + 1000); s.handle = 7; s.entry_ns = t + 60; s.kind = CP_SYNC_STREAM; s.device = 0; put(&s, sizeof(s));
	HDR(rt, CP_EV_RT_LAUNCH, 0, pid, pid, t + 1100); rt.stub = 0x401000; rt.stream = 0; put(&rt, sizeof(rt));
	HDR(l, CP_EV_LAUNCH, 0, pid, pid, t + 1200); l.function = 0x2000; l.stream = 0; l.device = 0; put(&l, sizeof(l));
	HDR(x, CP_EV_XID, 0, pid, 0, t + 1300); x.error_code = 79; x.process = pid; strcpy(x.dev, "0000:3b:00.0"); strcpy(x.msg, "GPU has fallen off the bus."); put(&x, sizeof(x));
	HDR(s, CP_EV_SYNC, 0, pid, pid, t + 2000); s.handle = 0; s.entry_ns = t + 1250; s.kind = CP_SYNC_CONTEXT; s.device = 0; put(&s, sizeof(s));
	HDR(f, CP_EV_FREE, 0, pid, pid, t + 2100); f.ptr = a.ptr; put(&f, sizeof(f));
	HDR(p, CP_EV_PROC, 0, pid, pid, t + 3000); p.kind = CP_PROC_EXIT; put(&p, sizeof(p));
}

int main(int argc, char **argv)
{
	char path[512];
	/* every catalogued type alone, zeroed, its own size */
#define ONE(NAME, value, member, type, name) do { struct type r; HDR(r, CP_EV_##NAME, 1, 100, 100, 1000); \
	snprintf(path, sizeof(path), "%s/type-%s", argv[1], name); out = fopen(path, "wb"); put(&r, sizeof(r)); fclose(out); } while (0);
	CP_RECORD_TYPES(ONE)
	snprintf(path, sizeof(path), "%s/one-process", argv[1]); out = fopen(path, "wb"); process(100, 1000000); fclose(out);
	snprintf(path, sizeof(path), "%s/two-processes", argv[1]); out = fopen(path, "wb");
	{ struct cp_proc_event p; HDR(p, CP_EV_PROC, 0, 100, 100, 10); p.kind = CP_PROC_FORK; p.child_pid = 200; put(&p, sizeof(p)); }
	process(100, 1000000); process(200, 1000500); fclose(out);
	return 0;
}
