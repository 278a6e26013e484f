// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Handle tables, and the kernel handles of instrumented kernels (inject_internal.h). */
#include "inject_internal.h"

/* ---- handle tables ------------------------------------------------------------------ */

static size_t slot_of(const struct handle_table *t, const void *handle)
{
	uintptr_t h = (uintptr_t)handle;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 29;
	return h & (t->capacity - 1);
}

/* The entry of handle, or NULL. Open addressing: NULL handles end a probe, tombstones do not. */
struct handle_entry *table_find(const struct handle_table *t, const void *handle)
{
	size_t i, n;

	if (!t->capacity || !handle)
		return NULL;
	for (i = slot_of(t, handle), n = 0; n < t->capacity; i = (i + 1) & (t->capacity - 1), n++) {
		if (!t->entries[i].handle)
			return NULL;
		if (t->entries[i].handle == handle)
			return &t->entries[i];
	}
	return NULL;
}

static int table_grow(struct handle_table *t)
{
	struct handle_table bigger = { .capacity = t->capacity ? t->capacity * 2 : 64 };
	size_t i;

	bigger.entries = calloc(bigger.capacity, sizeof(*bigger.entries));
	if (!bigger.entries)
		return -ENOMEM;
	for (i = 0; i < t->capacity; i++)
		if (t->entries[i].handle && t->entries[i].handle != TOMBSTONE)
			table_put(&bigger, t->entries[i].handle, t->entries[i].value, t->entries[i].owner);
	free(t->entries);
	*t = bigger;
	return 0;
}

int table_put(struct handle_table *t, const void *handle, void *value, const void *owner)
{
	struct handle_entry *e = table_find(t, handle);
	size_t i;

	if (e) {
		e->value = value;
		e->owner = owner;
		return 0;
	}
	if ((t->count + 1) * 2 > t->capacity && table_grow(t))
		return -ENOMEM;
	for (i = slot_of(t, handle);; i = (i + 1) & (t->capacity - 1))
		if (!t->entries[i].handle || t->entries[i].handle == TOMBSTONE)
			break;
	t->entries[i] = (struct handle_entry){ .handle = handle, .value = value, .owner = owner };
	t->count++;
	return 0;
}

/* Every entry whose owner is owner goes (a module's functions when it is unloaded). */
void table_remove_owned(struct handle_table *t, const void *owner)
{
	size_t i;

	for (i = 0; i < t->capacity; i++)
		if (t->entries[i].handle && t->entries[i].handle != TOMBSTONE &&
		    t->entries[i].owner == owner) {
			t->entries[i].handle = TOMBSTONE;
			t->entries[i].value = NULL;
		}
}

void module_info_free(struct module_info *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->kernel_count; i++)
		free(m->kernels[i].name);
	for (i = 0; i < m->image_count; i++)
		free(m->images[i]);
	free(m->kernels);
	free(m->images);
	free(m);
}

/* *image is m's now (NULL after): it stays as long as m. */
void keep_image(struct module_info *m, char **image)
{
	char **grown;

	if (!*image)
		return;
	grown = realloc(m->images, (m->image_count + 1) * sizeof(*grown));
	if (!grown)
		return; /* the caller frees it: a preserved binary would be the driver's problem then */
	m->images = grown;
	m->images[m->image_count++] = *image;
	*image = NULL;
}

static struct kernel_info *module_kernel(const struct module_info *m, const char *name)
{
	size_t i;

	for (i = 0; m && name && i < m->kernel_count; i++)
		if (!strcmp(m->kernels[i].name, name))
			return &m->kernels[i];
	return NULL;
}

/* ---- kernel handles ------------------------------------------------------------------------ */

/* handle is name's in module (or library) owner: remembered when it is instrumented there. */
static void name_handle(const void *owner, const void *handle, const char *name)
{
	struct handle_entry *e;
	struct kernel_info *k;

	if (!handle || !name)
		return;
	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.modules, owner);
	k = e ? module_kernel(e->value, name) : NULL;
	if (k && table_put(&inject.functions, handle, k, e->owner == owner ? owner : e->owner)) {
		pthread_rwlock_unlock(&inject.lock);
		report(CP_INJECT_ERROR, NULL, name, k->probes, 0,
		       "out of memory: this kernel will launch without its parameter");
		return;
	}
	pthread_rwlock_unlock(&inject.lock);
}

static bool has_instrumented(const void *owner)
{
	bool found;

	pthread_rwlock_rdlock(&inject.lock);
	found = table_find(&inject.modules, owner) != NULL;
	pthread_rwlock_unlock(&inject.lock);
	return found;
}

CUresult CUDAAPI wrap_cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	CUresult rc = REAL(cuModuleGetFunction, hfunc, hmod, name);

	if (rc == CUDA_SUCCESS && has_instrumented(hmod))
		name_handle(hmod, *hfunc, name);
	return rc;
}

CUresult CUDAAPI wrap_cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	CUresult rc = REAL(cuLibraryGetKernel, pKernel, library, name);

	if (rc == CUDA_SUCCESS && has_instrumented(library))
		name_handle(library, *pKernel, name);
	return rc;
}

/*
 * A handle that stands for one already known (under the write lock): its
 * entry copied under the new handle, with owner (or the known one's owner
 * when owner is NULL); nothing when they are the same handle.
 */
static void alias_handle(struct handle_table *t, const void *known, const void *handle,
			 const void *owner)
{
	struct handle_entry *e;

	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(t, known);
	if (e && handle != known)
		table_put(t, handle, e->value, owner ? owner : e->owner);
	pthread_rwlock_unlock(&inject.lock);
}

/* A CUkernel's per-context function is the same kernel. */
CUresult CUDAAPI wrap_cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	CUresult rc = REAL(cuKernelGetFunction, pFunc, kernel);

	if (rc == CUDA_SUCCESS)
		alias_handle(&inject.functions, kernel, *pFunc, NULL);
	return rc;
}

/* A library's module in the current context: its functions are the library's kernels. */
CUresult CUDAAPI wrap_cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	CUresult rc = REAL(cuLibraryGetModule, pMod, library);

	if (rc == CUDA_SUCCESS)
		alias_handle(&inject.modules, library, *pMod, library);
	return rc;
}

/* Names the handles an enumeration of an instrumented module or library gave. */
static void name_enumerated(const char *api, const void *owner, void *const *handles,
			    unsigned int count, bool kernels)
{
	unsigned int i;

	for (i = 0; i < count; i++) {
		const char *name = NULL;
		CUresult named = kernels ? HELPER(cuKernelGetName, &name, (CUkernel)handles[i]) :
					   HELPER(cuFuncGetName, &name, (CUfunction)handles[i]);

		if (named == CUDA_SUCCESS)
			name_handle(owner, handles[i], name);
		else
			report(CP_INJECT_ERROR, api, NULL, 0, 0,
			       "cannot name a %s (%s: %s): if it is instrumented, its launches fault",
			       kernels ? "kernel" : "function",
			       kernels ? "cuKernelGetName" : "cuFuncGetName", result_name(named));
	}
}

CUresult CUDAAPI wrap_cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
						 CUmodule mod)
{
	CUresult rc = REAL(cuModuleEnumerateFunctions, functions, numFunctions, mod);

	if (rc == CUDA_SUCCESS && functions && has_instrumented(mod))
		name_enumerated("cuModuleEnumerateFunctions", mod, (void *const *)functions,
				numFunctions, false);
	return rc;
}

CUresult CUDAAPI wrap_cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
						CUlibrary lib)
{
	CUresult rc = REAL(cuLibraryEnumerateKernels, kernels, numKernels, lib);

	if (rc == CUDA_SUCCESS && kernels && has_instrumented(lib))
		name_enumerated("cuLibraryEnumerateKernels", lib, (void *const *)kernels, numKernels,
				true);
	return rc;
}

HANDLE_HOOKS(HOOK_EXPORT)
