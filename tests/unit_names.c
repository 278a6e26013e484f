// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The name table, host-stub symbolization against this very test binary, demangling. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cuprobe_internal.h"
#include "helpers.h"

/*
 * A host function of this binary standing in for a kernel's host stub: its
 * ELF symbol is the mangled name nvcc gives the stub of
 * `__global__ void rt_probe_kernel(float *, int)`.
 */
__attribute__((noinline, used)) void fake_host_stub(float *p, int n) __asm__("_Z15rt_probe_kernelPfi");
__attribute__((noinline, used)) void fake_host_stub(float *p, int n)
{
	int i;

	for (i = 0; i < n; i++)
		p[i] += 1.0f;
	__asm__ volatile("" ::: "memory");
}

/* A plain C one too. */
__attribute__((noinline, used)) int cuprobe_test_c_stub(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

struct code_location {
	char path[4096];
	uint32_t dev;     /* kernel encoding */
	uint64_t inode;
	uint64_t file_offset;
};

/* Where addr lies in our executable: its file offset, found in /proc/self/maps. */
static void locate(const void *addr, struct code_location *loc)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	uintptr_t a = (uintptr_t)addr;
	char line[8192];
	struct stat st;
	ssize_t n;
	bool found = false;

	n = readlink("/proc/self/exe", loc->path, sizeof(loc->path) - 1);
	cr_assert(n > 0);
	loc->path[n] = '\0';
	cr_assert_eq(stat("/proc/self/exe", &st), 0);
	loc->dev = (major(st.st_dev) << 20) | minor(st.st_dev);
	loc->inode = st.st_ino;
	cr_assert_not_null(maps);
	while (fgets(line, sizeof(line), maps)) {
		unsigned long long start, end, offset, inode;
		unsigned int maj, min;

		if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &start, &end, &offset, &maj, &min,
			   &inode) != 6)
			continue;
		if (a >= start && a < end && inode == loc->inode) {
			loc->file_offset = a - start + offset;
			found = true;
			break;
		}
	}
	fclose(maps);
	cr_assert(found, "%p is in no mapping of %s", addr, loc->path);
}

/* ---- the symbol table of an ELF file ------------------------------------ */

Test(elf_symbols, symbol_at_the_offset_of_a_function_of_this_binary)
{
	struct code_location loc;
	char name[256];

	locate((const void *)fake_host_stub, &loc);
	cr_assert_eq(cp_elf__symbol_at_offset(loc.path, loc.file_offset, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "_Z15rt_probe_kernelPfi");
	/* An offset inside the function names it too. */
	cr_assert_eq(cp_elf__symbol_at_offset(loc.path, loc.file_offset + 1, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "_Z15rt_probe_kernelPfi");

	locate((const void *)cuprobe_test_c_stub, &loc);
	cr_assert_eq(cp_elf__symbol_at_offset(loc.path, loc.file_offset, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "cuprobe_test_c_stub");
}

Test(elf_symbols, failures)
{
	struct code_location loc;
	char name[256], *dir = make_tmpdir(), *text = path_join(dir, "not-elf");

	locate((const void *)fake_host_stub, &loc);
	/* The ELF header is mapped but is no function. */
	cr_assert_eq(cp_elf__symbol_at_offset(loc.path, 0, name, sizeof(name)), -ENOENT);
	/* Past the end of every segment. */
	cr_assert_lt(cp_elf__symbol_at_offset(loc.path, 1ull << 40, name, sizeof(name)), 0);
	/* A buffer too small for the name. */
	cr_assert_lt(cp_elf__symbol_at_offset(loc.path, loc.file_offset, name, 5), 0);
	cr_assert(write_text(text, "#!/bin/sh\necho not an ELF file\n"));
	cr_assert_eq(cp_elf__symbol_at_offset(text, 0, name, sizeof(name)), -ENOEXEC);
	cr_assert_eq(cp_elf__symbol_at_offset("/nonexistent/file", 0, name, sizeof(name)), -ENOENT);
	remove_tree(dir);
	free(text);
	free(dir);
}

Test(elf_symbols, function_offsets_of_several_names)
{
	const char *names[] = { "_Z15rt_probe_kernelPfi", "no_such_function_here", "cuprobe_test_c_stub" };
	struct code_location a, b;
	uint64_t offsets[3] = { 1, 1, 1 };

	locate((const void *)fake_host_stub, &a);
	locate((const void *)cuprobe_test_c_stub, &b);
	cr_assert_eq(cp_elf__function_offsets(a.path, names, 3, offsets), 2);
	cr_assert_eq(offsets[0], a.file_offset, "offset %#llx, mapped at file offset %#llx",
		     (unsigned long long)offsets[0], (unsigned long long)a.file_offset);
	cr_assert_eq(offsets[1], 0, "a missing name must give offset 0");
	cr_assert_eq(offsets[2], b.file_offset);
	cr_assert_eq(cp_elf__function_offsets("/nonexistent/file", names, 3, offsets), -ENOENT);
}

Test(elf_symbols, imported_functions_have_no_offset)
{
	/* We call printf, but it is defined in libc: in this file it is undefined. */
	const char *names[] = { "printf", "cuprobe_test_c_stub" };
	struct code_location loc;
	uint64_t offsets[2];

	locate((const void *)cuprobe_test_c_stub, &loc);
	printf("%s", "");
	cr_assert_eq(cp_elf__function_offsets(loc.path, names, 2, offsets), 1);
	cr_assert_eq(offsets[0], 0);
	cr_assert_eq(offsets[1], loc.file_offset);
}

Test(symbolizer, resolves_through_the_maps_of_a_live_process)
{
	struct cp_symbolizer *sym = cp_symbolizer__new();
	struct code_location loc;
	char name[256];

	cr_assert_not_null(sym);
	locate((const void *)fake_host_stub, &loc);
	cr_assert_eq(cp_symbolizer__resolve(sym, getpid(), loc.dev, loc.inode, loc.file_offset,
					    name, sizeof(name)), 0);
	cr_assert_str_eq(name, "_Z15rt_probe_kernelPfi");
	/* An unknown file identity and no process to learn from. */
	cr_assert_eq(cp_symbolizer__resolve(sym, 0, loc.dev, loc.inode + 1000000, loc.file_offset,
					    name, sizeof(name)), -ENOENT);
	cr_assert_eq(cp_symbolizer__resolve(sym, 0, loc.dev, 0, loc.file_offset, name,
					    sizeof(name)), -EINVAL);
	cp_symbolizer__free(sym);
}

Test(symbolizer, resolves_an_added_file_without_a_process)
{
	struct cp_symbolizer *sym = cp_symbolizer__new();
	struct code_location loc;
	char name[256];

	locate((const void *)cuprobe_test_c_stub, &loc);
	/* pid 0: no maps to read, so only the added file can answer. */
	cr_assert_eq(cp_symbolizer__resolve(sym, 0, loc.dev, loc.inode, loc.file_offset, name,
					    sizeof(name)), -ENOENT);
	cr_assert_eq(cp_symbolizer__add_file(sym, loc.path), 0);
	cr_assert_eq(cp_symbolizer__resolve(sym, 0, loc.dev, loc.inode, loc.file_offset, name,
					    sizeof(name)), 0);
	cr_assert_str_eq(name, "cuprobe_test_c_stub");
	cr_assert_lt(cp_symbolizer__add_file(sym, "/nonexistent/file"), 0);
	cp_symbolizer__free(sym);
}

/* ---- the name table ------------------------------------------------------ */

static union cp_event name_event(uint32_t pid, enum cp_api api, uint64_t handle, const char *name)
{
	union cp_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = CP_EV_NAME;
	ev.hdr.api = api;
	ev.hdr.pid = pid;
	ev.hdr.tid = pid;
	ev.name.handle = handle;
	if (name) {
		snprintf(ev.name.name, sizeof(ev.name.name), "%s", name);
		ev.name.name_len = strlen(name);
	}
	return ev;
}

static union cp_event alias_event(uint32_t pid, uint64_t function, uint64_t kernel)
{
	union cp_event ev = name_event(pid, CP_API_cuKernelGetFunction, function, NULL);

	ev.name.alias_of = kernel;
	return ev;
}

static union cp_event launch_event(uint32_t pid, uint32_t tid, uint64_t function, uint32_t flags)
{
	union cp_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = CP_EV_LAUNCH;
	ev.hdr.api = flags & CP_LAUNCH_GRAPH ? CP_API_cuGraphLaunch : CP_API_cuLaunchKernel;
	ev.hdr.pid = pid;
	ev.hdr.tid = tid;
	ev.launch.function = function;
	ev.launch.flags = flags;
	ev.launch.grid[0] = ev.launch.grid[1] = ev.launch.grid[2] = 1;
	ev.launch.block[0] = 32;
	ev.launch.block[1] = ev.launch.block[2] = 1;
	return ev;
}

static union cp_event proc_event(uint32_t pid, uint32_t kind, uint32_t child)
{
	union cp_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = CP_EV_PROC;
	ev.hdr.api = kind == CP_PROC_EXIT ? CP_API_sched_process_exit :
		     kind == CP_PROC_FORK ? CP_API_sched_process_fork : CP_API_cuInit;
	ev.hdr.pid = pid;
	ev.hdr.tid = pid;
	ev.proc.kind = kind;
	ev.proc.child_pid = child;
	return ev;
}

Test(names, set_and_lookup_per_pid)
{
	struct cp_names *names = cp_names__new(NULL);
	const struct cp_name_entry *a, *b;

	cr_assert_not_null(names);
	cr_assert_eq(cp_names__set(names, 100, 0xabc, "kernel_a"), 0);
	cr_assert_eq(cp_names__set(names, 200, 0xabc, "kernel_b"), 0);
	a = cp_names__lookup(names, 100, 0xabc);
	b = cp_names__lookup(names, 200, 0xabc);
	cr_assert_not_null(a);
	cr_assert_not_null(b);
	cr_assert_str_eq(a->mangled, "kernel_a");
	cr_assert_str_eq(a->display, "kernel_a");
	cr_assert_str_eq(b->mangled, "kernel_b");
	cr_assert_null(cp_names__lookup(names, 300, 0xabc));
	cr_assert_null(cp_names__lookup(names, 100, 0xabd));
	cr_assert_null(cp_names__lookup_stub(names, 100, 0xabc), "a handle name is not a stub name");
	cr_assert_eq(cp_names__count(names), 2);
	cr_assert_eq(cp_names__set(names, 100, 1, ""), -EINVAL);
	cr_assert_eq(cp_names__set(names, 100, 1, NULL), -EINVAL);
	cp_names__free(names);
}

Test(names, overwrite_and_demangled_display)
{
	struct cp_names *names = cp_names__new(NULL);
	const struct cp_name_entry *e;

	cr_assert_eq(cp_names__set(names, 7, 0x10, "first"), 0);
	cr_assert_eq(cp_names__set(names, 7, 0x10, "_Z15rt_probe_kernelPfi"), 0);
	e = cp_names__lookup(names, 7, 0x10);
	cr_assert_not_null(e);
	cr_assert_str_eq(e->mangled, "_Z15rt_probe_kernelPfi");
	cr_assert_str_eq(e->display, "rt_probe_kernel(float*, int)");
	cr_assert_eq(cp_names__count(names), 1, "an overwrite added an entry");
	/* The same name again changes nothing. */
	cr_assert_eq(cp_names__set(names, 7, 0x10, "_Z15rt_probe_kernelPfi"), 0);
	cr_assert_eq(cp_names__count(names), 1);
	cp_names__free(names);
}

Test(names, forget_pid)
{
	struct cp_names *names = cp_names__new(NULL);

	cp_names__set(names, 1, 0x1, "a");
	cp_names__set(names, 1, 0x2, "b");
	cp_names__set(names, 2, 0x1, "c");
	cp_names__forget_pid(names, 1);
	cr_assert_null(cp_names__lookup(names, 1, 0x1));
	cr_assert_null(cp_names__lookup(names, 1, 0x2));
	cr_assert_not_null(cp_names__lookup(names, 2, 0x1));
	cr_assert_eq(cp_names__count(names), 1);
	cp_names__forget_pid(names, 99); /* unknown: nothing happens */
	cr_assert_eq(cp_names__count(names), 1);
	cp_names__free(names);
}

Test(names, many_handles_survive_table_growth)
{
	struct cp_names *names = cp_names__new(NULL);
	char want[32];
	uint64_t h;

	for (h = 0; h < 5000; h++) {
		snprintf(want, sizeof(want), "k%" PRIu64, h);
		cr_assert_eq(cp_names__set(names, (uint32_t)(h % 3 + 1), 0x7f0000000000ull + h * 16, want), 0);
	}
	cr_assert_eq(cp_names__count(names), 5000);
	for (h = 0; h < 5000; h++) {
		const struct cp_name_entry *e =
			cp_names__lookup(names, (uint32_t)(h % 3 + 1), 0x7f0000000000ull + h * 16);

		snprintf(want, sizeof(want), "k%" PRIu64, h);
		cr_assert_not_null(e, "handle %" PRIu64 " lost", h);
		cr_assert_str_eq(e->mangled, want);
	}
	cp_names__free(names);
}

Test(names, observe_name_records)
{
	struct cp_names *names = cp_names__new(NULL);
	union cp_event ev = name_event(50, CP_API_cuModuleGetFunction, 0x5000, "_Z7vec_addPKfS0_Pfi");
	union cp_event failed = name_event(50, CP_API_cuModuleGetFunction, 0x6000, "missing");
	struct cp_names_stats stats;

	failed.name.result = 500; /* CUDA_ERROR_NOT_FOUND */
	cp_names__observe(names, &ev);
	cp_names__observe(names, &failed);
	cr_assert_not_null(cp_names__lookup(names, 50, 0x5000));
	cr_assert_str_eq(cp_names__lookup(names, 50, 0x5000)->display,
			 "vec_add(float const*, float const*, float*, int)");
	cr_assert_null(cp_names__lookup(names, 50, 0x6000), "a failed call named its handle");
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.names_learned, 1);
	cp_names__free(names);
}

Test(names, kernel_get_function_alias_takes_the_kernels_name)
{
	struct cp_names *names = cp_names__new(NULL);
	union cp_event kernel = name_event(60, CP_API_cuLibraryGetKernel, 0xa000, "vec_add");
	union cp_event alias = alias_event(60, 0xb000, 0xa000);
	union cp_event orphan = alias_event(60, 0xc000, 0xdead);
	union cp_event launch = launch_event(60, 61, 0xb000, 0);
	struct cp_names_stats stats;

	cp_names__observe(names, &kernel);
	cp_names__observe(names, &alias);
	cp_names__observe(names, &orphan);
	cr_assert_not_null(cp_names__lookup(names, 60, 0xb000));
	cr_assert_str_eq(cp_names__lookup(names, 60, 0xb000)->mangled, "vec_add");
	cr_assert_null(cp_names__lookup(names, 60, 0xc000), "an alias of an unknown kernel got a name");
	cp_names__observe(names, &launch);
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.launches, 1);
	cr_assert_eq(stats.launches_unnamed, 0);
	cr_assert_eq(stats.names_learned, 2);
	cp_names__free(names);
}

Test(names, launches_counted_unnamed_and_graphs_excluded)
{
	struct cp_names *names = cp_names__new(NULL);
	union cp_event named = launch_event(70, 70, 0x100, 0);
	union cp_event unnamed = launch_event(70, 70, 0x200, 0);
	union cp_event other_pid = launch_event(71, 71, 0x100, 0);
	union cp_event graph = launch_event(70, 70, 0x300, CP_LAUNCH_GRAPH);
	struct cp_names_stats stats;

	cp_names__set(names, 70, 0x100, "k");
	cp_names__observe(names, &named);
	cp_names__observe(names, &unnamed);
	cp_names__observe(names, &unnamed);
	cp_names__observe(names, &other_pid); /* same handle, another process: unknown */
	cp_names__observe(names, &graph);
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.launches, 4, "graph launches must not count as kernel launches");
	cr_assert_eq(stats.launches_unnamed, 3);
	cp_names__free(names);
}

Test(names, records_never_forget_a_process_forget_pid_does)
{
	struct cp_names *names = cp_names__new(NULL);
	union cp_event fork_ev = proc_event(80, CP_PROC_FORK, 81);
	union cp_event init_ev = proc_event(80, CP_PROC_CUDA_INIT, 0);
	union cp_event exit_ev = proc_event(80, CP_PROC_EXIT, 0);

	cp_names__set(names, 80, 0x1, "a");
	cp_names__set(names, 82, 0x1, "b");
	cp_names__observe(names, &fork_ev);
	cp_names__observe(names, &init_ev);
	cr_assert_not_null(cp_names__lookup(names, 80, 0x1), "fork/cuInit must not forget names");
	/* The exit record is reported with its names: forgetting is the caller's explicit step. */
	cp_names__observe(names, &exit_ev);
	cr_assert_not_null(cp_names__lookup(names, 80, 0x1));
	cp_names__forget_pid(names, 80);
	cr_assert_null(cp_names__lookup(names, 80, 0x1));
	cr_assert_not_null(cp_names__lookup(names, 82, 0x1));
	cp_names__free(names);
}

static union cp_event rt_event_for(void (*fn)(float *, int), uint32_t pid, uint32_t tid, uint64_t stub)
{
	struct code_location loc;
	union cp_event ev;

	locate((const void *)fn, &loc);
	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = CP_EV_RT_LAUNCH;
	ev.hdr.api = CP_API_cudaLaunchKernel;
	ev.hdr.pid = pid;
	ev.hdr.tid = tid;
	ev.rt_launch.stub = stub;
	ev.rt_launch.dev = loc.dev;
	ev.rt_launch.inode = loc.inode;
	ev.rt_launch.file_offset = loc.file_offset;
	ev.rt_launch.grid[0] = 2;
	ev.rt_launch.block[0] = 64;
	return ev;
}

Test(names, rt_launch_names_the_next_launch_of_the_same_thread)
{
	struct cp_symbolizer *sym = cp_symbolizer__new();
	struct cp_names *names = cp_names__new(sym);
	uint32_t pid = (uint32_t)getpid(), tid = pid + 1;
	uint64_t stub = (uint64_t)(uintptr_t)fake_host_stub;
	union cp_event rt = rt_event_for(fake_host_stub, pid, tid, stub);
	union cp_event launch = launch_event(pid, tid, 0x77770000, 0);
	const struct cp_name_entry *e;
	struct cp_names_stats stats;

	cp_names__observe(names, &rt);
	e = cp_names__lookup_stub(names, pid, stub);
	cr_assert_not_null(e, "the stub was not symbolized");
	cr_assert_str_eq(e->mangled, "_Z15rt_probe_kernelPfi");
	cr_assert_str_eq(e->display, "rt_probe_kernel(float*, int)");

	cp_names__observe(names, &launch);
	e = cp_names__lookup(names, pid, 0x77770000);
	cr_assert_not_null(e, "the driver launch after cudaLaunchKernel was not named");
	cr_assert_str_eq(e->mangled, "_Z15rt_probe_kernelPfi");
	cr_assert_str_eq(e->display, "rt_probe_kernel(float*, int)");
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.stubs_resolved, 1);
	cr_assert_eq(stats.stubs_unresolved, 0);
	cr_assert_eq(stats.launches, 1);
	cr_assert_eq(stats.launches_unnamed, 0);
	cp_names__free(names);
	cp_symbolizer__free(sym);
}

Test(names, rt_launch_does_not_name_another_threads_launch)
{
	struct cp_symbolizer *sym = cp_symbolizer__new();
	struct cp_names *names = cp_names__new(sym);
	uint32_t pid = (uint32_t)getpid();
	uint64_t stub = (uint64_t)(uintptr_t)fake_host_stub;
	union cp_event rt = rt_event_for(fake_host_stub, pid, pid + 1, stub);
	union cp_event other_thread = launch_event(pid, pid + 2, 0x88880000, 0);
	union cp_event same_thread_named = launch_event(pid, pid + 1, 0x99990000, 0);
	struct cp_names_stats stats;

	cp_names__observe(names, &rt);
	cp_names__observe(names, &other_thread);
	cr_assert_null(cp_names__lookup(names, pid, 0x88880000));
	/* A handle that already has a name keeps it. */
	cp_names__set(names, pid, 0x99990000, "already_named");
	cp_names__observe(names, &same_thread_named);
	cr_assert_str_eq(cp_names__lookup(names, pid, 0x99990000)->mangled, "already_named");
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.launches, 2);
	cr_assert_eq(stats.launches_unnamed, 1);
	cp_names__free(names);
	cp_symbolizer__free(sym);
}

Test(names, unresolvable_stub_is_counted_not_guessed)
{
	struct cp_symbolizer *sym = cp_symbolizer__new();
	struct cp_names *names = cp_names__new(sym);
	uint32_t pid = (uint32_t)getpid();
	union cp_event rt = rt_event_for(fake_host_stub, pid, pid, 0x1234);
	union cp_event launch = launch_event(pid, pid, 0xaaaa0000, 0);
	struct cp_names_stats stats;

	rt.rt_launch.inode += 1000000; /* a file nobody has */
	cp_names__observe(names, &rt);
	cp_names__observe(names, &rt); /* looked up once, not per launch */
	cp_names__observe(names, &launch);
	cr_assert_null(cp_names__lookup_stub(names, pid, 0x1234));
	cr_assert_null(cp_names__lookup(names, pid, 0xaaaa0000));
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.stubs_resolved, 0);
	cr_assert_eq(stats.stubs_unresolved, 1);
	cr_assert_eq(stats.launches_unnamed, 1);
	cp_names__free(names);
	cp_symbolizer__free(sym);
}

/* ---- demangling ---------------------------------------------------------- */

Test(demangle, itanium_names)
{
	char out[256];

	cr_assert_eq(cp_demangle("_Z15rt_probe_kernelPfi", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "rt_probe_kernel(float*, int)");
	cr_assert_eq(cp_demangle("_ZN2ns6kernelIfEEvPT_i", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "void ns::kernel<float>(float*, int)");
}

/* nvcc's names of kernels of internal linkage (NCCL 2.28's one-rank reduction, as its libnccl names it). */
Test(demangle, nvcc_static_kernel_names)
{
	char out[256];

	cr_assert_eq(cp_demangle("__nv_static_32__b4148644_10_onerank_cu_fdf47990__ZN43_GLOBAL__N__b4148644_10_onerank_cu_fdf4799013oneRankReduceI13FuncPreMulSumIfEEEvPvS3_mmb",
				 out, sizeof(out)), 0);
	cr_assert_str_eq(out, "void (anonymous namespace)::oneRankReduce<FuncPreMulSum<float> >(void*, void*, unsigned long, unsigned long, bool)");
	/* A tag shorter than it says, or no Itanium name after it: as it is. */
	cr_assert_eq(cp_demangle("__nv_static_99__short__Z3fooi", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "__nv_static_99__short__Z3fooi");
	cr_assert_eq(cp_demangle("__nv_static_3__abcvec_add", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "__nv_static_3__abcvec_add");
}

Test(demangle, c_names_and_invalid_manglings_unchanged)
{
	char out[64];

	cr_assert_eq(cp_demangle("vec_add", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "vec_add");
	cr_assert_eq(cp_demangle("_Znot a mangling", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "_Znot a mangling");
	cr_assert_eq(cp_demangle("", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "");
}

Test(demangle, too_small_buffer_truncates)
{
	char out[10];

	memset(out, 'x', sizeof(out));
	cr_assert_eq(cp_demangle("_Z15rt_probe_kernelPfi", out, sizeof(out)), -ENOSPC);
	cr_assert_eq(out[9], '\0');
	cr_assert_str_eq(out, "rt_probe_");
	/* Exactly the length + NUL fits. */
	char exact[sizeof("rt_probe_kernel(float*, int)")];
	cr_assert_eq(cp_demangle("_Z15rt_probe_kernelPfi", exact, sizeof(exact)), 0);
	cr_assert_str_eq(exact, "rt_probe_kernel(float*, int)");
	cr_assert_eq(cp_demangle("vec_add", exact, 4), -ENOSPC);
	cr_assert_str_eq(exact, "vec");
	cr_assert_eq(cp_demangle("vec_add", exact, 0), -EINVAL);
}

/* nvcc's device-stub symbols, as nm shows them in real objects built here. */
Test(device_stub, kernel_name_from_the_stub_symbol)
{
	char out[256];

	cr_assert_eq(cp_kernel_name_from_device_stub(
			     "_Z41__device_stub__Z14vec_add_kernelPKfS0_PfiPKfS0_Pfi", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "_Z14vec_add_kernelPKfS0_Pfi");
	/* A template kernel in a namespace: the stub has internal linkage (_ZL). */
	cr_assert_eq(cp_kernel_name_from_device_stub(
			     "_ZL49__device_stub__ZN2at6native11fill_kernelIfEEvPT_iPfi", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "_ZN2at6native11fill_kernelIfEEvPT_i");
}

Test(device_stub, other_symbols_name_nothing)
{
	char out[256];

	cr_assert_eq(cp_kernel_name_from_device_stub(
			     "_ZN2at6nativeL34__wrapper__device_stub_fill_kernelIfEEvRPT_Ri", out, sizeof(out)),
		     -ENOENT);
	cr_assert_eq(cp_kernel_name_from_device_stub("main", out, sizeof(out)), -ENOENT);
	cr_assert_eq(cp_kernel_name_from_device_stub("_Z99__device_stub__Z1kv", out, sizeof(out)), -ENOENT,
		     "a length past the end of the symbol");
	cr_assert_eq(cp_kernel_name_from_device_stub(
			     "_Z41__device_stub__Z14vec_add_kernelPKfS0_PfiPKfS0_Pfi", out, 8), -ENOENT,
		     "a name that does not fit");
}

/*
 * The driver's CUkernel record keeps a pointer to the kernel's name in its
 * second word (driver 580). These fake records live in this test process,
 * which reads them back through process_vm_readv as cuprobe reads a target.
 */
struct fake_kernel_record {
	uint64_t first_word;
	const char *name;
	uint64_t more[4];
};

/* handle is named mangled from a driver record, the only one, after one launch left unnamed. */
static void assert_driver_named_once(struct cp_names *names, uint32_t pid, uint64_t handle,
				     const char *mangled)
{
	const struct cp_name_entry *entry = cp_names__lookup(names, pid, handle);
	struct cp_names_stats stats;

	cr_assert_not_null(entry);
	cr_assert_str_eq(entry->mangled, mangled);
	cr_assert_eq(entry->source, CP_NAME_FROM_DRIVER);
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.driver_named, 1);
	cr_assert_eq(stats.launches_unnamed, 1, "only the launch before the name is unnamed");
}

Test(driver_records, name_a_handle_from_before_the_attach)
{
	static struct fake_kernel_record record = { 1, "_Z6kernelPf", { 0 } };
	struct cp_names *names = cp_names__new(NULL);
	union cp_event launch = launch_event(getpid(), getpid(), (uintptr_t)&record, 0);

	cr_assert_not_null(names);
	cp_names__observe(names, &launch);
	cr_assert_null(cp_names__lookup(names, getpid(), (uintptr_t)&record), "read while off");
	cp_names__read_driver_records(names, true);
	cp_names__observe(names, &launch);
	assert_driver_named_once(names, getpid(), (uintptr_t)&record, "_Z6kernelPf");
	cp_names__free(names);
}

Test(driver_records, only_symbol_shaped_strings_are_taken)
{
	static struct fake_kernel_record spaced = { 1, "not a symbol", { 0 } };
	static struct fake_kernel_record empty = { 1, "", { 0 } };
	static struct fake_kernel_record null_name = { 1, NULL, { 0 } };
	struct cp_names *names = cp_names__new(NULL);
	struct cp_names_stats stats;
	union cp_event e;

	cp_names__read_driver_records(names, true);
	e = launch_event(getpid(), getpid(), (uintptr_t)&spaced, 0);
	cp_names__observe(names, &e);
	e = launch_event(getpid(), getpid(), (uintptr_t)&empty, 0);
	cp_names__observe(names, &e);
	e = launch_event(getpid(), getpid(), (uintptr_t)&null_name, 0);
	cp_names__observe(names, &e);
	e = launch_event(getpid(), getpid(), 0x10, 0); /* not mapped */
	cp_names__observe(names, &e);
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.driver_named, 0);
	cr_assert_eq(stats.launches_unnamed, 4);
	cp_names__free(names);
}

Test(driver_records, a_disagreement_with_a_probe_turns_them_off)
{
	static struct fake_kernel_record agrees = { 1, "_Z1av", { 0 } };
	static struct fake_kernel_record disagrees = { 1, "_Z1bv", { 0 } };
	static struct fake_kernel_record later = { 1, "_Z1cv", { 0 } };
	struct cp_names *names = cp_names__new(NULL);
	struct cp_names_stats stats;
	union cp_event e;

	cp_names__read_driver_records(names, true);
	e = name_event(getpid(), CP_API_cuLibraryGetKernel, (uintptr_t)&agrees, "_Z1av");
	cp_names__observe(names, &e);
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.driver_checked, 1);
	cr_assert_eq(stats.driver_mismatches, 0);
	/* The probe says _Z1xv, the record _Z1bv: the layout is not the measured one. */
	e = name_event(getpid(), CP_API_cuLibraryGetKernel, (uintptr_t)&disagrees, "_Z1xv");
	cp_names__observe(names, &e);
	cr_assert_str_eq(cp_names__lookup(names, getpid(), (uintptr_t)&disagrees)->mangled, "_Z1xv",
			 "the probe's name wins");
	e = launch_event(getpid(), getpid(), (uintptr_t)&later, 0);
	cp_names__observe(names, &e);
	cr_assert_null(cp_names__lookup(names, getpid(), (uintptr_t)&later),
		       "records read after a disagreement");
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.driver_mismatches, 1);
	cr_assert_eq(stats.driver_named, 0);
	cp_names__free(names);
}

Test(driver_records, an_alias_of_an_old_kernel_is_named_through_its_record)
{
	static struct fake_kernel_record kernel = { 1, "_Z4gemmv", { 0 } };
	struct cp_names *names = cp_names__new(NULL);
	const struct cp_name_entry *entry;
	union cp_event e;

	cp_names__read_driver_records(names, true);
	e = alias_event(getpid(), 0xf00d, (uintptr_t)&kernel);
	cp_names__observe(names, &e);
	entry = cp_names__lookup(names, getpid(), 0xf00d);
	cr_assert_not_null(entry, "the CUfunction from cuKernelGetFunction is unnamed");
	cr_assert_str_eq(entry->mangled, "_Z4gemmv");
	cr_assert_eq(entry->source, CP_NAME_FROM_DRIVER);
	cp_names__free(names);
}

/*
 * With name_late_handles the launch probe reads the record while the process
 * is in the call: its name record (api: the launch's) names the handle even
 * when the process is gone by the time the records are read. A pid that
 * cannot be alive (past pid_max) stands for that process here.
 */
#define GONE_PID 0x7ffffff0u

Test(driver_records, a_launch_probes_record_names_a_handle_of_a_process_gone_since)
{
	struct cp_names *names = cp_names__new(NULL);
	union cp_event e;

	cp_names__read_driver_records(names, true);
	e = launch_event(GONE_PID, GONE_PID, 0xabc0, 0);
	cp_names__observe(names, &e);
	cr_assert_null(cp_names__lookup(names, GONE_PID, 0xabc0), "read from a process that is gone");
	e = name_event(GONE_PID, CP_API_cuLaunchKernel, 0xabc0, "_Z6kernelPf");
	cr_assert(cp_name_event__from_driver_record(&e.name));
	cp_names__observe(names, &e);
	e = launch_event(GONE_PID, GONE_PID, 0xabc0, 0);
	cp_names__observe(names, &e);
	assert_driver_named_once(names, GONE_PID, 0xabc0, "_Z6kernelPf");
	/* Empty (unreadable in the probe) or not symbol-shaped: nothing taken. */
	e = name_event(GONE_PID, CP_API_cuLaunchKernelEx, 0xabd0, "");
	cp_names__observe(names, &e);
	e = name_event(GONE_PID, CP_API_cuLaunchKernelEx, 0xabe0, "not a symbol");
	cp_names__observe(names, &e);
	cr_assert_null(cp_names__lookup(names, GONE_PID, 0xabd0));
	cr_assert_null(cp_names__lookup(names, GONE_PID, 0xabe0));
	/* Off: the records are not read, whoever read them. */
	cp_names__read_driver_records(names, false);
	e = name_event(GONE_PID, CP_API_cuLaunchKernel, 0xabf0, "_Z1fv");
	cp_names__observe(names, &e);
	cr_assert_null(cp_names__lookup(names, GONE_PID, 0xabf0));
	cp_names__free(names);
}

Test(driver_records, a_launch_probes_record_checks_a_probes_name_and_never_replaces_it)
{
	struct cp_names *names = cp_names__new(NULL);
	struct cp_names_stats stats;
	union cp_event e;

	cp_names__read_driver_records(names, true);
	e = name_event(GONE_PID, CP_API_cuModuleGetFunction, 0x100, "_Z1av");
	cp_names__observe(names, &e);
	e = name_event(GONE_PID, CP_API_cuLaunchKernel, 0x100, "_Z1av");
	cp_names__observe(names, &e);
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.driver_checked, 1);
	cr_assert_eq(stats.driver_mismatches, 0);
	cr_assert_eq(cp_names__lookup(names, GONE_PID, 0x100)->source, CP_NAME_FROM_PROBE);
	/* A record that disagrees with the probe: the probe's name stays, records are off. */
	e = name_event(GONE_PID, CP_API_cuModuleGetFunction, 0x200, "_Z1bv");
	cp_names__observe(names, &e);
	e = name_event(GONE_PID, CP_API_cuLaunchKernel, 0x200, "_Z1xv");
	cp_names__observe(names, &e);
	cr_assert_str_eq(cp_names__lookup(names, GONE_PID, 0x200)->mangled, "_Z1bv");
	e = name_event(GONE_PID, CP_API_cuLaunchKernel, 0x300, "_Z1cv");
	cp_names__observe(names, &e);
	cr_assert_null(cp_names__lookup(names, GONE_PID, 0x300), "taken after a disagreement");
	cp_names__stats(names, &stats);
	cr_assert_eq(stats.driver_checked, 2);
	cr_assert_eq(stats.driver_mismatches, 1);
	cr_assert_eq(stats.driver_named, 0);
	cp_names__free(names);
}
