// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libcuprobe_inject.so: the one piece of cuprobe that runs inside a traced
 * process. `cuprobe run PROG -- COMMAND` preloads it into COMMAND when PROG
 * has device programs (SEC("gpu/GLOB"), SEC("gpu.exit/GLOB")); nothing else
 * in cuprobe puts code into a process.
 *
 * What it does, all on the threads COMMAND calls the driver from (it starts
 * no thread of its own):
 *  - at load: reads the plan cuprobe passed (inject_protocol.h), maps each
 *    BPF map the programs use (MAP_SHARED on the inherited map fd: the
 *    memory belongs to the kernel map, so this process exiting cannot pull
 *    it from under cuprobe) and the launch-slot map;
 *  - module loads (cuModuleLoad*, cuLibraryLoad*, cuLink*): finds the PTX
 *    the device can JIT in the image (fatbin.h), rewrites the kernels the
 *    programs' globs match (ptx_rewrite.h) and loads the result through the
 *    driver's own entry point; an image with no matching kernel is passed
 *    on as it came, byte for byte; matching kernels without usable PTX are
 *    reported by name;
 *  - kernel handles (cuModuleGetFunction, cuLibraryGetKernel, ...): those of
 *    instrumented kernels are remembered;
 *  - launches of those (every launch entry point, _ptsz twins, graph kernel
 *    nodes): one more parameter, the device address of a launch slot; the
 *    slot's header (cp_launch_slot_header) sits just before the new
 *    kernelParams array, where cuprobe's BPF launch program reads it;
 *  - the maps and the slots are registered with the driver
 *    (cuMemHostRegister, DEVICEMAP | PORTABLE) once a context is current.
 *  - counters' shadows (device memory in each instrumented module) are
 *    drained into the maps at the calls that prove kernels done and before
 *    a module or context goes (inject_drain.c).
 *
 * The driver is reached both ways programs reach it: by symbol (our
 * exports interpose libcuda's) and through cuGetProcAddress, which cudart
 * resolves from dlsym on libcuda's handle (so dlsym is wrapped too).
 * Reports go to cuprobe over the inherited report socket; nothing is
 * printed.
 */
#include "inject_internal.h"


struct hook hooks[HOOK_MAX] = {
#define HOOK_ENTRY(fn, since_version, is_ptsz)					\
	[HOOK_##fn] = { .name = #fn, .wrapper = (void *)wrap_##fn, .since = since_version, .ptsz = is_ptsz },
	HOOKS(HOOK_ENTRY)
#undef HOOK_ENTRY
};

static const char *const helper_names[HELPER_MAX] = {
#define HELPER_NAME(name) #name,
	HELPERS(HELPER_NAME)
#undef HELPER_NAME
};
static _Atomic(void *) helpers[HELPER_MAX];

/* dlsym itself, from libc: ours is what the program sees. */
static void *(*libc_dlsym)(void *, const char *);

static void *libcuda(void)
{
	return dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
}

static void resolve_libc_dlsym(void)
{
	if (!libc_dlsym)
		libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (!libc_dlsym)
		libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
}

/* The driver's own function: from libcuda.so.1 as loaded, looked up once. */
static void *driver_symbol(const char *name)
{
	void *handle, *fn;

	resolve_libc_dlsym();
	handle = libcuda();
	if (!handle || !libc_dlsym)
		return NULL;
	fn = libc_dlsym(handle, name);
	dlclose(handle);
	return fn;
}

void *inject_real(enum hook_id id)
{
	void *fn = atomic_load(&hooks[id].real), *none = NULL;

	if (fn)
		return fn;
	fn = driver_symbol(hooks[id].name);
	if (fn && fn != hooks[id].wrapper)
		atomic_compare_exchange_strong(&hooks[id].real, &none, fn);
	return atomic_load(&hooks[id].real);
}

void *inject_helper(enum helper_id id)
{
	void *fn = atomic_load(&helpers[id]);

	if (!fn) {
		fn = driver_symbol(helper_names[id]);
		atomic_store(&helpers[id], fn);
	}
	return fn;
}

struct inject_state inject = {
	.fatbins = CP_LOADED_FATBINS_INIT,
	.register_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_RWLOCK_INITIALIZER,
};

/* ---- how programs find the driver's functions ------------------------------------------------ */

/*
 * fn, which the driver (through dlsym or cuGetProcAddress) gave for hook
 * id: ours to hand out instead. The first pointer seen for a hook is the
 * one it calls; another one (a second copy of the driver) is passed on
 * unwrapped, and said.
 */
static void *wrapped(enum hook_id id, void *fn)
{
	void *none = NULL, *known;
	static atomic_bool said;
	bool no = false;

	if (!fn || fn == hooks[id].wrapper)
		return fn;
	if (!atomic_compare_exchange_strong(&hooks[id].real, &none, fn) && (known = atomic_load(&hooks[id].real)) != fn) {
		if (atomic_compare_exchange_strong(&said, &no, true))
			report(CP_INJECT_ERROR, hooks[id].name, NULL, 0, 0,
			       "a second CUDA driver in the process: its modules are not instrumented");
		return fn;
	}
	return hooks[id].wrapper;
}

static int hook_by_name(const char *name)
{
	int i;

	for (i = 0; name && i < HOOK_MAX; i++)
		if (!strcmp(hooks[i].name, name))
			return i;
	return -1;
}

/*
 * cuGetProcAddress("cuLaunchKernel", ...) hands out a variant
 * (cuLaunchKernel_ptsz, ...) by version and flags: the pointer says which,
 * compared with the driver's exports; failing that, the version and the
 * per-thread flag choose.
 */
static void *proc_address(const char *symbol, void *fn, int cuda_version, cuuint64_t flags)
{
	size_t len = symbol ? strlen(symbol) : 0;
	static atomic_bool said;
	bool no = false;
	int i, best = -1;
	bool ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

	if (!inject.active || !fn)
		return fn;
	for (i = 0; i < HOOK_MAX; i++)
		if (fn == hooks[i].wrapper)
			return fn; /* the driver's own table names our export (it interposes) */
	for (i = 0; i < HOOK_MAX; i++) {
		const char *rest = hooks[i].name + len;

		if (strncmp(hooks[i].name, symbol, len) || (*rest && strncmp(rest, "_v", 2) && strncmp(rest, "_ptsz", 5)))
			continue;
		if (driver_symbol(hooks[i].name) == fn || atomic_load(&hooks[i].real) == fn)
			return wrapped((enum hook_id)i, fn);
		if (hooks[i].ptsz == ptsz && hooks[i].since <= cuda_version &&
		    (best < 0 || hooks[i].since > hooks[best].since))
			best = i;
	}
	if (best < 0)
		return fn;
	/* Said once: a driver whose table is not its exports does it for every entry point. */
	if (atomic_compare_exchange_strong(&said, &no, true))
		report(CP_INJECT_NOTE, "cuGetProcAddress", symbol, 0, 0,
		       "the driver's entry point is none of its exports: wrapped as %s by version %d (and so for the others)",
		       hooks[best].name, cuda_version);
	return wrapped((enum hook_id)best, fn);
}

CUresult CUDAAPI wrap_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
						     cuuint64_t flags)
{
	CUresult rc = REAL(cuGetProcAddress, symbol, pfn, cudaVersion, flags);

	if (rc == CUDA_SUCCESS && pfn)
		*pfn = proc_address(symbol, *pfn, cudaVersion, flags);
	return rc;
}

CUresult CUDAAPI wrap_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
							cuuint64_t flags,
							CUdriverProcAddressQueryResult *symbolStatus)
{
	CUresult rc = REAL(cuGetProcAddress_v2, symbol, pfn, cudaVersion, flags, symbolStatus);

	if (rc == CUDA_SUCCESS && pfn)
		*pfn = proc_address(symbol, *pfn, cudaVersion, flags);
	return rc;
}

/*
 * cudart finds cuGetProcAddress with dlsym on libcuda's handle: that lookup
 * comes here. dlsym(RTLD_NEXT, ...) searches after its caller, found from
 * the return address: those go straight on to libc's dlsym by a jump, so
 * the caller's return address is the one libc sees (an entry in assembly:
 * a C tail call is not guaranteed). The others, whose answer does not
 * depend on the caller, come to inject_dlsym. dlvsym is left alone: libc's
 * is how this library finds libc's dlsym.
 */
__attribute__((visibility("hidden"))) void *(*inject_libc_dlsym)(void *, const char *);

__attribute__((visibility("hidden"), used)) void inject_resolve_dl(void)
{
	resolve_libc_dlsym();
	inject_libc_dlsym = libc_dlsym;
}

__attribute__((visibility("hidden"), used)) void *inject_dlsym(void *handle, const char *name)
{
	void *fn;
	int id;

	if (!inject_libc_dlsym)
		inject_resolve_dl();
	if (!inject_libc_dlsym)
		return NULL;
	fn = inject_libc_dlsym(handle, name);
	if (!inject.active || !fn || !name || name[0] != 'c' || name[1] != 'u')
		return fn;
	id = hook_by_name(name);
	return id < 0 ? fn : wrapped((enum hook_id)id, fn);
}

/* dlsym: RTLD_NEXT ((void *)-1) jumps on to libc's, resolving it first if need be. */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	cmpq $-1, %rdi\n"
	"	jne inject_dlsym\n"
	"	movq inject_libc_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"
	"	jmp *%rax\n"
	"1:	pushq %rdi\n"
	"	pushq %rsi\n"
	"	subq $8, %rsp\n"
	"	call inject_resolve_dl\n"
	"	addq $8, %rsp\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	jmp *inject_libc_dlsym(%rip)\n"
	".size dlsym, .-dlsym\n");

RESOLVE_HOOKS(HOOK_EXPORT)

/* ---- start ------------------------------------------------------------------------------ */

static int map_region(int fd, size_t size, bool read_only, struct region *r)
{
	void *base = mmap(NULL, PAGE_ROUND(size), read_only ? PROT_READ : PROT_READ | PROT_WRITE,
			  MAP_SHARED, fd, 0);

	if (base == MAP_FAILED)
		return -errno;
	r->base = base;
	r->size = PAGE_ROUND(size);
	return 0;
}

struct cp_ptx_map *inject_map_shapes(size_t *count, size_t **region_of)
{
	struct cp_ptx_map *shapes;
	size_t i, symbols = 0;

	for (i = 0; i < inject.plan.map_count; i++)
		if (inject.plan.maps[i].index + 1 > symbols)
			symbols = inject.plan.maps[i].index + 1;
	shapes = calloc(symbols ? symbols : 1, sizeof(*shapes));
	*region_of = calloc(symbols ? symbols : 1, sizeof(**region_of));
	if (!shapes || !*region_of) {
		free(shapes);
		free(*region_of);
		*region_of = NULL;
		return NULL;
	}
	for (i = 0; i < inject.plan.map_count; i++) {
		const struct cp_inject_map *map = &inject.plan.maps[i];

		/* Device maps are arrays (the translator refused the others); rings are told by names. */
		shapes[map->index] = (struct cp_ptx_map){ .name = map->name, .type = BPF_MAP_TYPE_ARRAY,
							  .value_size = map->value_size,
							  .max_entries = map->max_entries };
		(*region_of)[map->index] = i;
	}
	*count = symbols;
	return shapes;
}

/*
 * The prelude every instrumented module gets: the declarations of the maps
 * (each at the address this process mapped it, under the index the
 * translator named it by), the shadows the programs add into, the rings'
 * segments, and the programs' functions.
 */
static int make_prelude(void)
{
	size_t symbols = 0, *region_of = NULL, i;
	struct cp_ptx_map *shapes = inject_map_shapes(&symbols, &region_of);
	uint64_t *addresses = calloc(symbols ? symbols : 1, sizeof(*addresses));
	bool *declare = calloc(symbols ? symbols : 1, sizeof(*declare));
	char *declarations = NULL;
	int err = addresses && declare && shapes ? 0 : -ENOMEM;

	for (i = 0; !err && i < inject.plan.map_count; i++) {
		const struct cp_inject_map *map = &inject.plan.maps[i];
		char shadow[64];

		addresses[map->index] = (uint64_t)(uintptr_t)inject.maps[i].base;
		declare[map->index] = true;
		/* A shadow only where some program adds into one (and the drain moves only those). */
		snprintf(shadow, sizeof(shadow), CP_PTX_SHADOW_PREFIX "%u;", map->index);
		shapes[map->index].without_shadow = !inject.plan.functions ||
						    !strstr(inject.plan.functions, shadow) ||
						    inject.maps[i].read_only;
	}
	if (!err)
		err = cp_ptx__map_declarations(addresses, shapes, declare, symbols, &declarations,
					       &inject.shadowed);
	if (!err && asprintf(&inject.prelude, "%s%s", declarations,
			     inject.plan.functions ? inject.plan.functions : "") < 0) {
		inject.prelude = NULL;
		err = -ENOMEM;
	}
	free(declarations);
	free(addresses);
	free(declare);
	free(shapes);
	free(region_of);
	return err;
}

static int start(const char *fd_text)
{
	char error[256], *end;
	struct stat st;
	void *bytes;
	long fd = strtol(fd_text, &end, 10);
	size_t i;
	int err;

	if (*end || fd < 0 || fd > 65535 || fstat((int)fd, &st) || st.st_size <= 0 ||
	    (size_t)st.st_size > CP_INJECT_PLAN_MAX)
		return -EBADF;
	bytes = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, (int)fd, 0);
	if (bytes == MAP_FAILED)
		return -errno;
	err = cp_inject_plan__decode(bytes, (size_t)st.st_size, &inject.plan, error, sizeof(error));
	munmap(bytes, (size_t)st.st_size);
	if (err)
		return err;
	if (!fstat(inject.plan.report_fd, &st) && S_ISSOCK(st.st_mode)) {
		inject.report_dev = st.st_dev;
		inject.report_ino = st.st_ino;
	} else {
		inject.plan.report_fd = -1; /* closed before we came: nothing can be said */
	}
	inject.maps = calloc(inject.plan.map_count ? inject.plan.map_count : 1, sizeof(*inject.maps));
	inject.probes = calloc(inject.plan.program_count ? inject.plan.program_count : 1,
			       sizeof(*inject.probes));
	if (!inject.maps || !inject.probes) {
		report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < inject.plan.map_count; i++) {
		const struct cp_inject_map *m = &inject.plan.maps[i];

		err = map_region(m->fd, (size_t)((m->value_size + 7) / 8 * 8) * m->max_entries, m->read_only,
				 &inject.maps[i]);
		inject.maps[i].read_only = m->read_only;
		if (err) {
			report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "cannot map map %s: %s", m->name, strerror(-err));
			return err;
		}
	}
	if (inject.plan.launch_slot_count) {
		err = map_region(inject.plan.launch_slots_fd, (size_t)inject.plan.launch_slot_count * 8,
				 false, &inject.slots);
		if (err) {
			report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "cannot map the launch slots: %s", strerror(-err));
			return err;
		}
	}
	for (i = 0; i < inject.plan.program_count; i++)
		inject.probes[i] = (struct cp_ptx_probe){ .glob = inject.plan.programs[i].glob,
							  .function = inject.plan.programs[i].function,
							  .at_exit = inject.plan.programs[i].at_exit };
	err = make_prelude();
	if (err)
		report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "out of memory");
	return err;
}

/* A forked child has no CUDA context of its parent's: it registers the maps again. */
static void after_fork_in_child(void)
{
	atomic_store(&inject.registered, false);
	atomic_store(&inject.register_reported, false);
	inject.register_result = CUDA_SUCCESS;
	pthread_mutex_init(&inject.register_lock, NULL);
	pthread_rwlock_init(&inject.lock, NULL);
	drain_after_fork_in_child();
}

__attribute__((constructor)) static void inject_init(void)
{
	const char *plan = getenv(CP_INJECT_PLAN_ENV);

	inject.plan.report_fd = -1;
	inject_resolve_dl();
	if (!plan)
		return;
	if (start(plan)) {
		/* Inactive: every module passes as it came; cuprobe hears no READY from us. */
		cp_inject_plan__release(&inject.plan);
		inject.plan.report_fd = -1;
		return;
	}
	pthread_atfork(NULL, NULL, after_fork_in_child);
	inject.active = true;
	report(CP_INJECT_READY, NULL, NULL, 0, 0, NULL);
}

