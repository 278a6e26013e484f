// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Counters' shadows drained into the kernel's maps (inject_internal.h).
 *
 * A counter's adds land in its module's device-memory shadow (ptx_jit.h),
 * where they cost what an add in device memory costs. What the shadows
 * gained reaches the kernel's map here, on the program's own thread, at the
 * calls that prove kernels done (the timeline's evidence: synchronizations,
 * completed queries, blocking copies), and before a module, library or
 * context goes: the shadows are copied on a stream of our own (non-blocking:
 * it waits for none of the program's work) and each word's growth since the
 * last drain is added to the map with a CPU atomic. Shadows only grow (adds
 * modulo 2^64), so a copy taken while other kernels still add is exact too:
 * what it missed is in the next one. The device rings' segments are
 * moved at the same calls (inject_ring.c), but only by a proof that leaves
 * no launch of the context possibly running (a ring's records are whole
 * only once the kernels that write them are done): launches are noted
 * before they are made, and a proof during which one was noted proves
 * nothing of it. A module's rings are also moved before it or its context
 * goes, after a synchronization of the context.
 */
#include "inject_internal.h"

/* One map's shadow in one module. */
struct drain_shadow {
	size_t map;               /* inject.plan.maps / inject.maps index */
	CUdeviceptr address;
	unsigned int replicas;
	uint64_t words, stride;   /* stride: bytes from one copy to the next */
	size_t staging_offset;
	uint64_t *drained;        /* each word's sum over the copies at the last drain */
};

/* A module (one per context) whose instrumented kernels add into shadows. */
struct drain_target {
	CUmodule module;
	CUcontext context;
	CUdevice device;
	const void *owner;        /* the module or library the program loaded */
	CUstream stream;          /* ours, non-blocking */
	unsigned char *staging;   /* pinned: every shadow's bytes, one after another */
	struct drain_shadow *shadows;
	size_t shadow_count;
	struct drain_rings *rings;  /* the module's device rings, or NULL */
	bool always;              /* in a graph: its launches are not seen, drained at every proof */
	bool legacy;              /* launched by cuLaunch or cuLaunchGrid (not seen): proved by a context's proof */
	bool rings_waiting;       /* a proof drained it with kernels possibly running: rings not moved */
	bool failure_said;
};

/* A kernel handle launched in a context, and its target. */
struct drain_route {
	const void *handle;
	CUcontext context;
	struct drain_target *target;
};

/*
 * A stream with launches of such kernels that nothing has proved done yet:
 * while a context has one, each proof in it drains (a proof of one stream
 * says nothing of another's kernels, which may still be adding).
 */
struct drain_stream {
	CUcontext context;
	CUstream stream;          /* CU_STREAM_LEGACY or CU_STREAM_PER_THREAD for the defaults */
	pid_t thread;             /* for CU_STREAM_PER_THREAD: whose */
};

static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static struct drain_target **targets;
static size_t target_count;
static atomic_bool any_target;
static struct drain_route *routes;
static size_t route_count;
static struct drain_stream *unproved;
static size_t unproved_count;
/* Launches noted, each before it is made: a proof that saw this change proved nothing of them. */
static atomic_uint_fast64_t launches_noted;
/* Queries that drained with kernels possibly running: the rings waited for a later proof. */
static uint64_t ring_moves_deferred;
/* Blocking proofs that synchronized the context to move the rings. */
static uint64_t ring_settles;

static void say_failure(struct drain_target *t, const char *what, CUresult rc)
{
	if (t->failure_said)
		return;
	t->failure_said = true;
	report(CP_INJECT_ERROR, NULL, NULL, 0, 0,
	       "cannot drain the counters' shadows into the maps (%s: %s): their adds stay on the GPU until a drain succeeds",
	       what, result_name(rc));
}

/* The module a handle's kernel runs from in the current context. */
static CUresult module_of(const void *owner, CUmodule *module)
{
	struct handle_entry *e;
	bool library;

	pthread_rwlock_rdlock(&inject.lock);
	e = table_find(&inject.modules, owner);
	library = e && e->owner == owner && ((struct module_info *)e->value)->library;
	pthread_rwlock_unlock(&inject.lock);
	if (!library) {
		*module = (CUmodule)owner;
		return CUDA_SUCCESS;
	}
	return REAL(cuLibraryGetModule, module, (CUlibrary)owner);
}

static void target_free(struct drain_target *t, bool context_alive)
{
	size_t i;

	if (!t)
		return;
	if (context_alive) {
		if (t->stream)
			HELPER(cuStreamDestroy_v2, t->stream);
		if (t->staging)
			HELPER(cuMemFreeHost, t->staging);
	}
	drain_rings_free(t->rings, context_alive);
	for (i = 0; i < t->shadow_count; i++)
		free(t->shadows[i].drained);
	free(t->shadows);
	free(t);
}

/* The shadows of module (in the current context): a target, or NULL (said why). */
static struct drain_target *target_make(CUmodule module, const void *owner)
{
	struct drain_target *t = calloc(1, sizeof(*t));
	size_t i, staging = 0;
	CUresult rc = CUDA_SUCCESS;

	if (!t || !(t->shadows = calloc(inject.plan.map_count ? inject.plan.map_count : 1, sizeof(*t->shadows)))) {
		report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "out of memory: counters' shadows will not be drained");
		target_free(t, false);
		return NULL;
	}
	t->module = module;
	t->owner = owner;
	HELPER(cuCtxGetCurrent, &t->context);
	HELPER(cuCtxGetDevice, &t->device);
	for (i = 0; i < inject.plan.map_count && rc == CUDA_SUCCESS; i++) {
		const struct cp_inject_map *map = &inject.plan.maps[i];
		struct drain_shadow *s = &t->shadows[t->shadow_count];
		char name[64];
		size_t bytes = 0;

		snprintf(name, sizeof(name), CP_PTX_SHADOW_PREFIX "%u;", map->index);
		/* The prelude declares a shadow only for a map some program adds into (inject.c). */
		s->replicas = cp_ptx__shadow_replicas(map->value_size, map->max_entries);
		if (!s->replicas || inject.maps[i].read_only || !inject.plan.functions ||
		    !strstr(inject.plan.functions, name))
			continue;
		name[strlen(name) - 1] = '\0';
		rc = HELPER(cuModuleGetGlobal_v2, &s->address, &bytes, module, name);
		if (rc == CUDA_ERROR_NOT_FOUND) {
			/* No kernel of this module adds to it: the compiler left it out. */
			rc = CUDA_SUCCESS;
			continue;
		}
		if (rc != CUDA_SUCCESS)
			break;
		s->map = i;
		s->stride = cp_ptx__shadow_stride(map->value_size, map->max_entries);
		s->words = ((uint64_t)map->value_size + 7) / 8 * map->max_entries;
		s->staging_offset = staging;
		if (bytes < s->replicas * s->stride || !(s->drained = calloc(s->words, sizeof(uint64_t)))) {
			rc = bytes < s->replicas * s->stride ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		staging += s->replicas * s->stride;
		t->shadow_count++;
	}
	if (rc == CUDA_SUCCESS && staging)
		rc = HELPER(cuMemAllocHost_v2, (void **)&t->staging, staging);
	if (rc == CUDA_SUCCESS)
		rc = drain_rings_find(module, &t->rings);
	if (rc == CUDA_SUCCESS && (staging || t->rings))
		rc = HELPER(cuStreamCreate, &t->stream, CU_STREAM_NON_BLOCKING);
	if (rc != CUDA_SUCCESS) {
		report(CP_INJECT_ERROR, NULL, NULL, 0, 0,
		       "cannot find the module's counter shadows or ring segments (%s): what they hold will not reach the maps",
		       result_name(rc));
		target_free(t, true);
		return NULL;
	}
	return t;
}

/* How a drain finds the kernels: its rings are moved only when none that write them can run. */
enum drain_state {
	DRAIN_MAYBE_RUNNING,
	DRAIN_QUIESCENT,
	DRAIN_SETTLE,        /* synchronize the context first (before a module or context goes) */
};
static void drain_in_its_context(struct drain_target *t, CUcontext current, enum drain_state state,
				 bool then_free);

/*
 * What the shadows gained since the last drain, added to the maps; the
 * rings moved when nothing that writes them can be running (quiescent).
 */
static void drain_target(struct drain_target *t, bool quiescent)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	CUresult rc = CUDA_SUCCESS;
	bool rings = t->rings && quiescent;
	size_t i, r;
	uint64_t w;

	if (t->rings && !quiescent) {
		t->rings_waiting = true;
		ring_moves_deferred++;
	}
	if (!t->shadow_count && !rings)
		return;
	/* Our copies are not the program's: allowed while another stream captures. */
	HELPER(cuThreadExchangeStreamCaptureMode, &mode);
	/* The rings' counters and the shadows copied, then one synchronization for both. */
	if (rings)
		drain_rings_ask(t->rings, t->stream); /* said when it fails */
	for (i = 0; i < t->shadow_count && rc == CUDA_SUCCESS; i++)
		rc = HELPER(cuMemcpyDtoHAsync_v2, t->staging + t->shadows[i].staging_offset,
			    t->shadows[i].address, t->shadows[i].replicas * t->shadows[i].stride, t->stream);
	if (rc == CUDA_SUCCESS)
		rc = REAL(cuStreamSynchronize, t->stream);
	if (rings && rc == CUDA_SUCCESS && drain_rings_move(t->rings, t->stream) == CUDA_SUCCESS)
		t->rings_waiting = false;
	HELPER(cuThreadExchangeStreamCaptureMode, &mode);
	if (rc != CUDA_SUCCESS) {
		say_failure(t, "copying them", rc);
		return;
	}
	for (i = 0; i < t->shadow_count; i++) {
		struct drain_shadow *s = &t->shadows[i];
		uint64_t *values = inject.maps[s->map].base;

		for (w = 0; w < s->words; w++) {
			uint64_t sum = 0, grown;

			for (r = 0; r < s->replicas; r++)
				sum += ((const uint64_t *)(t->staging + s->staging_offset + r * s->stride))[w];
			grown = sum - s->drained[w];
			s->drained[w] = sum;
			if (grown)
				__atomic_fetch_add(&values[w], grown, __ATOMIC_SEQ_CST);
		}
	}
}

/* The stream as a key: the default streams by what they are (and per-thread ones by thread). */
static struct drain_stream stream_key(CUcontext context, CUstream stream, bool per_thread)
{
	struct drain_stream key = { .context = context, .stream = stream };

	if (!stream)
		key.stream = per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
	if (key.stream == CU_STREAM_PER_THREAD)
		key.thread = gettid();
	return key;
}

static bool same_stream(const struct drain_stream *a, const struct drain_stream *b)
{
	return a->context == b->context && a->stream == b->stream && a->thread == b->thread;
}

/* A stream with a launch not proved done yet, once; under drain_lock. */
static void note_unproved(const struct drain_stream *key)
{
	struct drain_stream *grown;
	size_t i;

	for (i = 0; i < unproved_count && !same_stream(&unproved[i], key); i++)
		;
	if (i == unproved_count && (grown = realloc(unproved, (unproved_count + 1) * sizeof(*unproved)))) {
		unproved = grown;
		unproved[unproved_count++] = *key;
	}
}

void drain_note_launch(const void *handle, const void *owner, CUstream stream, bool per_thread,
		       enum drain_launch how)
{
	CUcontext context = NULL;
	struct drain_target *t = NULL, **grown_targets;
	struct drain_route *grown_routes;
	struct drain_stream key;
	CUmodule module;
	size_t i;

	if (HELPER(cuCtxGetCurrent, &context) != CUDA_SUCCESS || !context)
		return;
	key = stream_key(context, stream, per_thread);
	pthread_mutex_lock(&drain_lock);
	atomic_fetch_add(&launches_noted, 1);
	for (i = 0; i < route_count && !t; i++)
		if (routes[i].handle == handle && routes[i].context == context)
			t = routes[i].target;
	if (!t && module_of(owner, &module) == CUDA_SUCCESS) {
		for (i = 0; i < target_count && !t; i++)
			if (targets[i]->module == module && targets[i]->context == context)
				t = targets[i];
		if (!t && (t = target_make(module, owner))) {
			grown_targets = realloc(targets, (target_count + 1) * sizeof(*targets));
			if (grown_targets) {
				targets = grown_targets;
				targets[target_count++] = t;
				atomic_store(&any_target, true);
			} else {
				target_free(t, true);
				t = NULL;
			}
		}
		grown_routes = t ? realloc(routes, (route_count + 1) * sizeof(*routes)) : NULL;
		if (grown_routes) {
			routes = grown_routes;
			routes[route_count++] = (struct drain_route){ handle, context, t };
		}
	}
	if (t && how != DRAIN_LAUNCH) {
		t->always = true;
		t->legacy |= how == DRAIN_LEGACY;
	} else if (t) {
		note_unproved(&key);
	}
	pthread_mutex_unlock(&drain_lock);
}

/*
 * A graph's launch: its kernels are not seen one by one, so it is noted as
 * a launch on its stream (before it is made), which only a proof of that
 * stream or of the context proves done.
 */
static void note_graph_launch(CUstream stream, bool per_thread)
{
	CUcontext context = NULL;
	struct drain_stream key;

	if (!atomic_load(&any_target) || HELPER(cuCtxGetCurrent, &context) != CUDA_SUCCESS || !context)
		return;
	key = stream_key(context, stream, per_thread);
	pthread_mutex_lock(&drain_lock);
	atomic_fetch_add(&launches_noted, 1);
	note_unproved(&key);
	pthread_mutex_unlock(&drain_lock);
}

CUresult CUDAAPI wrap_cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	note_graph_launch(hStream, false);
	return REAL(cuGraphLaunch, hGraphExec, hStream);
}

CUresult CUDAAPI wrap_cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	note_graph_launch(hStream, true);
	return REAL(cuGraphLaunch_ptsz, hGraphExec, hStream);
}

void drain_after_proof(enum drain_proof proof, CUcontext context, CUstream stream, bool per_thread,
		       uint64_t noted_before, bool blocking)
{
	struct drain_stream key;
	bool due = false, quiescent;
	size_t i, kept = 0;

	if (!atomic_load(&any_target))
		return;
	if (!context && (HELPER(cuCtxGetCurrent, &context) != CUDA_SUCCESS || !context))
		return;
	key = stream_key(context, stream, per_thread);
	pthread_mutex_lock(&drain_lock);
	for (i = 0; i < unproved_count && !due; i++)
		due = unproved[i].context == context;
	for (i = 0; i < target_count && !due; i++)
		due = targets[i]->context == context && targets[i]->always;
	/*
	 * What the proof proved done: its stream's launches, or the whole
	 * context's; nothing when a launch was noted while it ran (it may be
	 * one the proof did not cover).
	 */
	quiescent = atomic_load(&launches_noted) == noted_before;
	for (i = 0; i < unproved_count; i++)
		if (!quiescent ||
		    !(proof == DRAIN_PROOF_CONTEXT ? unproved[i].context == context :
		      proof == DRAIN_PROOF_STREAM && same_stream(&unproved[i], &key)))
			unproved[kept++] = unproved[i];
	unproved_count = kept;
	/* Nothing of the context may still run: none unproved, cuLaunch's kernels proved by a context's proof. */
	for (i = 0; i < unproved_count && quiescent; i++)
		quiescent = unproved[i].context != context;
	for (i = 0; i < target_count && quiescent && proof != DRAIN_PROOF_CONTEXT; i++)
		quiescent = !(targets[i]->context == context && targets[i]->legacy);
	if (due) {
		CUcontext current = NULL;
		/*
		 * A blocking call waits for the context's other kernels too (while
		 * this lock holds back new launches), so that its rings are moved
		 * now; a query, which must not block, leaves them for a later proof.
		 */
		enum drain_state state = quiescent ? DRAIN_QUIESCENT :
					 blocking ? DRAIN_SETTLE : DRAIN_MAYBE_RUNNING;

		HELPER(cuCtxGetCurrent, &current);
		for (i = 0; i < target_count; i++)
			if (targets[i]->context == context) {
				if (state == DRAIN_SETTLE && targets[i]->rings)
					ring_settles++;
				drain_in_its_context(targets[i], current, state, false);
				if (state == DRAIN_SETTLE && targets[i]->rings && !targets[i]->rings_waiting)
					state = DRAIN_QUIESCENT; /* synchronized once is enough */
			}
		/* Synchronized: every launch of the context proved (none noted since: the lock). */
		for (i = 0, kept = 0; state == DRAIN_QUIESCENT && i < unproved_count; i++)
			if (unproved[i].context != context)
				unproved[kept++] = unproved[i];
		if (state == DRAIN_QUIESCENT)
			unproved_count = kept;
	}
	pthread_mutex_unlock(&drain_lock);
}

/*
 * A target drained with its context current (pushed when another is), and
 * freed after when asked; under drain_lock.
 */
static void drain_in_its_context(struct drain_target *t, CUcontext current, enum drain_state state,
				 bool then_free)
{
	bool pushed = t->context != current && HELPER(cuCtxPushCurrent_v2, t->context) == CUDA_SUCCESS;
	CUcontext ignored;

	if (t->context == current || pushed) {
		/* A faulted context fails the synchronization: its rings are left, as is its memory. */
		if (state == DRAIN_SETTLE)
			state = !t->rings || REAL(cuCtxSynchronize) == CUDA_SUCCESS ? DRAIN_QUIESCENT :
										    DRAIN_MAYBE_RUNNING;
		drain_target(t, state == DRAIN_QUIESCENT);
	}
	if (then_free)
		target_free(t, true);
	if (pushed)
		HELPER(cuCtxPopCurrent_v2, &ignored);
}

static bool of_owner(const struct drain_target *t, const void *owner)
{
	return t->owner == owner || (const void *)t->module == owner;
}

static bool of_context(const struct drain_target *t, const void *context)
{
	return (const void *)t->context == context;
}

/*
 * Targets that match go: drained first and their stream and staging freed
 * while their context lives, only forgotten once it is gone. Under drain_lock.
 */
static void forget(bool (*matches)(const struct drain_target *, const void *), const void *what,
		   bool context_alive)
{
	CUcontext current = NULL;
	size_t i, kept = 0, j, routes_kept;

	HELPER(cuCtxGetCurrent, &current);
	for (i = 0; i < target_count; i++) {
		struct drain_target *t = targets[i];

		if (!matches(t, what)) {
			targets[kept++] = t;
			continue;
		}
		for (j = 0, routes_kept = 0; j < route_count; j++)
			if (routes[j].target != t)
				routes[routes_kept++] = routes[j];
		route_count = routes_kept;
		if (context_alive)
			drain_in_its_context(t, current, DRAIN_SETTLE, true);
		else
			target_free(t, false);
	}
	target_count = kept;
	for (i = 0, kept = 0; i < unproved_count; i++)
		if (!(matches == of_context && unproved[i].context == what))
			unproved[kept++] = unproved[i];
	unproved_count = kept;
}

void drain_before_unload(const void *owner)
{
	pthread_mutex_lock(&drain_lock);
	forget(of_owner, owner, true);
	pthread_mutex_unlock(&drain_lock);
}

void drain_before_context_goes(CUcontext context)
{
	pthread_mutex_lock(&drain_lock);
	forget(of_context, context, true);
	pthread_mutex_unlock(&drain_lock);
}

/* The device's primary context when it is active (its count of users unchanged), or NULL. */
static CUcontext active_primary(CUdevice device)
{
	CUcontext primary = NULL;
	unsigned int flags = 0;
	int active = 0;

	if (HELPER(cuDevicePrimaryCtxGetState, device, &flags, &active) != CUDA_SUCCESS || !active ||
	    HELPER(cuDevicePrimaryCtxRetain, &primary, device) != CUDA_SUCCESS)
		return NULL;
	REAL(cuDevicePrimaryCtxRelease_v2, device);
	return primary;
}

static CUresult drain_around_primary_release(CUdevice device, bool reset)
{
	CUcontext primary = atomic_load(&any_target) ? active_primary(device) : NULL, current = NULL;
	CUresult rc;
	size_t i;

	if (primary) {
		pthread_mutex_lock(&drain_lock);
		if (reset) {
			forget(of_context, primary, true);
		} else {
			HELPER(cuCtxGetCurrent, &current);
			for (i = 0; i < target_count; i++)
				if (targets[i]->context == primary)
					drain_in_its_context(targets[i], current, DRAIN_SETTLE, false);
		}
		pthread_mutex_unlock(&drain_lock);
	}
	rc = reset ? REAL(cuDevicePrimaryCtxReset_v2, device) : REAL(cuDevicePrimaryCtxRelease_v2, device);
	if (rc == CUDA_SUCCESS && primary && !reset && !active_primary(device)) {
		/* Released for good: its memory went with it. */
		pthread_mutex_lock(&drain_lock);
		forget(of_context, primary, false);
		pthread_mutex_unlock(&drain_lock);
	}
	return rc;
}

void drain_after_fork_in_child(void)
{
	size_t i;

	pthread_mutex_init(&drain_lock, NULL);
	for (i = 0; i < target_count; i++)
		target_free(targets[i], false);
	free(targets);
	free(routes);
	free(unproved);
	targets = NULL;
	routes = NULL;
	unproved = NULL;
	target_count = route_count = unproved_count = 0;
	ring_moves_deferred = ring_settles = 0;
	atomic_store(&any_target, false);
}

/* At exit: launches whose adds no drain has moved, records no drain could move, are said, not lost silently. */
__attribute__((destructor)) static void drain_at_exit(void)
{
	size_t pending, waiting = 0, i;
	uint64_t deferred, settles;

	pthread_mutex_lock(&drain_lock);
	pending = unproved_count;
	deferred = ring_moves_deferred;
	settles = ring_settles;
	for (i = 0; i < target_count; i++)
		waiting += targets[i]->rings_waiting;
	pthread_mutex_unlock(&drain_lock);
	if (pending)
		report(CP_INJECT_NOTE, NULL, NULL, 0, 0,
		       "%zu stream(s) launched instrumented kernels after their last synchronization: the counters and device rings may miss those launches' adds and records",
		       pending);
	if (waiting)
		report(CP_INJECT_NOTE, NULL, NULL, 0, 0,
		       "%zu module(s) hold device-ring records that no synchronization could move (%llu found instrumented kernels possibly running, on another stream or launched during the call, and none after found every kernel done): those records are not counted",
		       waiting, (unsigned long long)deferred);
	else if (deferred)
		report(CP_INJECT_NOTE, NULL, NULL, 0, 0,
		       "%llu completed quer(ies) found instrumented kernels possibly running (on another stream, or launched during the call): their device-ring records were moved at a later proof",
		       (unsigned long long)deferred);
	if (settles)
		report(CP_INJECT_NOTE, NULL, NULL, 0, 0,
		       "%llu synchronization(s) found instrumented kernels possibly running (on another stream, or launched during the call): each waited for the whole context before moving the device rings",
		       (unsigned long long)settles);
}

/* ---- the calls that prove kernels done -------------------------------------------------- */

#define PROOF(wrapper, hook, proof, blocking, context, stream, per_thread, params, ...) \
	CUresult CUDAAPI wrapper params						\
	{									\
		uint64_t noted = atomic_load(&launches_noted);			\
		CUresult rc = REAL(hook, ##__VA_ARGS__);			\
										\
		if (rc == CUDA_SUCCESS)						\
			drain_after_proof(proof, context, stream, per_thread, noted, blocking); \
		return rc;							\
	}

PROOF(wrap_cuCtxSynchronize, cuCtxSynchronize, DRAIN_PROOF_CONTEXT, true, NULL, NULL, false, (void))
PROOF(wrap_cuCtxSynchronize_v2, cuCtxSynchronize_v2, DRAIN_PROOF_CONTEXT, true, ctx, NULL, false,
      (CUcontext ctx), ctx)
PROOF(wrap_cuStreamSynchronize, cuStreamSynchronize, DRAIN_PROOF_STREAM, true, NULL, hStream, false,
      (CUstream hStream), hStream)
PROOF(wrap_cuStreamSynchronize_ptsz, cuStreamSynchronize_ptsz, DRAIN_PROOF_STREAM, true, NULL, hStream, true,
      (CUstream hStream), hStream)
PROOF(wrap_cuStreamQuery, cuStreamQuery, DRAIN_PROOF_STREAM, false, NULL, hStream, false,
      (CUstream hStream), hStream)
PROOF(wrap_cuStreamQuery_ptsz, cuStreamQuery_ptsz, DRAIN_PROOF_STREAM, false, NULL, hStream, true,
      (CUstream hStream), hStream)
PROOF(wrap_cuEventSynchronize, cuEventSynchronize, DRAIN_PROOF_OTHER, true, NULL, NULL, false,
      (CUevent hEvent), hEvent)
PROOF(wrap_cuEventQuery, cuEventQuery, DRAIN_PROOF_OTHER, false, NULL, NULL, false, (CUevent hEvent), hEvent)
/* A blocking copy returns after the legacy stream's work. */
PROOF(wrap_cuMemcpyHtoD_v2, cuMemcpyHtoD_v2, DRAIN_PROOF_STREAM, true, NULL, CU_STREAM_LEGACY, false,
      (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), dstDevice, srcHost, ByteCount)
PROOF(wrap_cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2_ptds, DRAIN_PROOF_STREAM, true, NULL, CU_STREAM_PER_THREAD,
      true, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), dstDevice, srcHost,
      ByteCount)
PROOF(wrap_cuMemcpyDtoH_v2, cuMemcpyDtoH_v2, DRAIN_PROOF_STREAM, true, NULL, CU_STREAM_LEGACY, false,
      (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), dstHost, srcDevice, ByteCount)
PROOF(wrap_cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2_ptds, DRAIN_PROOF_STREAM, true, NULL, CU_STREAM_PER_THREAD,
      true, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), dstHost, srcDevice, ByteCount)

/* ---- the context going ------------------------------------------------------------------ */

CUresult CUDAAPI wrap_cuCtxDestroy_v2(CUcontext ctx)
{
	if (atomic_load(&any_target))
		drain_before_context_goes(ctx);
	return REAL(cuCtxDestroy_v2, ctx);
}

CUresult CUDAAPI wrap_cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return drain_around_primary_release(dev, false);
}

CUresult CUDAAPI wrap_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	return drain_around_primary_release(dev, true);
}

DRAIN_HOOKS(HOOK_EXPORT)
