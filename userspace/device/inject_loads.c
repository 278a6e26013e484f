// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Module loads, library loads and links: the images rewritten (inject_internal.h). */
#include "inject_internal.h"

/* ---- module loads --------------------------------------------------------------------- */

static void report_names(enum cp_inject_report_kind kind, const char *api, char **names, size_t count,
			 unsigned int arch, const char *detail)
{
	size_t i, j;

	for (i = 0; i < count; i++) {
		uint64_t probes = 0;

		for (j = 0; j < inject.plan.program_count; j++)
			if (cp_ptx__glob_matches(inject.plan.programs[j].glob, names[i]))
				probes |= 1ull << j;
		if (probes)
			report(kind, api, names[i], probes, arch, "%s", detail);
	}
}

/* Does any program's glob match one of the kernels? */
static bool any_matches(char *const *names, size_t count)
{
	size_t i, j;

	for (i = 0; i < count; i++)
		for (j = 0; j < inject.plan.program_count; j++)
			if (cp_ptx__glob_matches(inject.plan.programs[j].glob, names[i]))
				return true;
	return false;
}

/*
 * A cubin has no PTX, but the fatbin it was picked from may (cudart loads
 * the cubin for the device, never the fatbin): that fatbin's PTX for the
 * device, when some program's glob matches one of the cubin's kernels.
 * -ENODATA: none matches (nothing to say); -ENOENT: no fatbin with PTX.
 */
static int ptx_of_cubin(const struct cp_image *cubin, unsigned int arch, char **ptx, size_t *len,
			char *origin, size_t origin_size)
{
	struct cp_cubin_fatbin from;
	struct cp_image fatbin;
	char **names = NULL;
	size_t count = 0;
	int err;

	err = cp_image__elf_kernels(cubin, arch, &names, &count);
	if (err)
		return err;
	if (!any_matches(names, count)) {
		cp_image__free_names(names, count);
		return -ENODATA;
	}
	err = cp_loaded_fatbins__find(&inject.fatbins, cubin, names, count, arch, &from);
	cp_image__free_names(names, count);
	if (err)
		return err;
	err = cp_image__parse(from.fatbin, from.size, &fatbin, NULL, 0);
	if (err)
		return -ENOENT;
	err = cp_image__ptx_for(&fatbin, arch, ptx, len, NULL);
	cp_image__release(&fatbin);
	if (!err)
		snprintf(origin, origin_size, "PTX from the fatbin its cubin came from (%s, %s)",
			 *from.object ? from.object : "the program", cp_cubin_origin__name(from.origin));
	return err;
}

/*
 * What to load in place of image (bound: how many bytes may be read; SIZE_MAX
 * for a pointer a driver call was handed): the rewritten PTX (the caller frees
 * it) and what it instruments in *info; NULL to load image unchanged.
 */
static char *instrument(const char *api, const void *image, size_t bound, struct module_info **info)
{
	struct cp_ptx_rewrite_opts opts = { .probes = inject.probes,
					    .probe_count = inject.plan.program_count,
					    .prelude = inject.prelude };
	struct cp_ptx_rewrite rewrite;
	struct cp_image parsed;
	char error[512], origin[320] = "", *ptx = NULL, **names = NULL, *text = NULL;
	unsigned int arch, ptx_arch = 0;
	size_t len, count = 0, i, n = 0;
	int err;

	*info = NULL;
	if (!inject.active || !image)
		return NULL;
	err = cp_image__parse(image, bound, &parsed, error, sizeof(error));
	if (err) {
		/* Not an image we know: the driver decides what it is. */
		if (err != -ENOEXEC)
			report(CP_INJECT_ERROR, api, NULL, 0, 0, "cannot read the module image: %s", error);
		return NULL;
	}
	arch = device_arch();
	err = cp_image__ptx_for(&parsed, arch, &ptx, &len, &ptx_arch);
	if (err == -ENOENT && parsed.kind == CP_IMAGE_ELF) {
		err = ptx_of_cubin(&parsed, arch, &ptx, &len, origin, sizeof(origin));
		if (err == -ENODATA) {
			cp_image__release(&parsed);
			return NULL;
		}
	}
	if (err) {
		if (err == -ENOENT && !cp_image__elf_kernels(&parsed, arch, &names, &count)) {
			char detail[64];

			snprintf(detail, sizeof(detail), "no PTX for sm_%u", arch);
			report_names(CP_INJECT_NO_PTX, api, names, count, arch, detail);
		} else if (err != -ENOENT) {
			report(CP_INJECT_ERROR, api, NULL, 0, arch, "cannot extract the module's PTX: %s",
			       strerror(-err));
		}
		cp_image__free_names(names, count);
		cp_image__release(&parsed);
		return NULL;
	}
	cp_image__release(&parsed);
	err = cp_ptx__rewrite(ptx, len, &opts, &rewrite, error, sizeof(error));
	free(ptx);
	if (err) {
		for (i = 0; i < rewrite.kernel_count; i++)
			if (rewrite.kernels[i].probes)
				report(CP_INJECT_REFUSED, api, rewrite.kernels[i].name,
				       rewrite.kernels[i].probes, arch, "%s", error);
		if (!rewrite.kernel_count || err == -ENOMEM)
			report(CP_INJECT_ERROR, api, NULL, 0, arch, "cannot rewrite the module: %s", error);
		cp_ptx_rewrite__release(&rewrite);
		return NULL;
	}
	if (!rewrite.text) {
		cp_ptx_rewrite__release(&rewrite);
		return NULL;
	}
	*info = calloc(1, sizeof(**info));
	if (*info)
		(*info)->kernels = calloc(rewrite.kernel_count, sizeof(*(*info)->kernels));
	if (!*info || !(*info)->kernels) {
		report(CP_INJECT_ERROR, api, NULL, 0, arch, "out of memory: the module is loaded as it was");
		goto fail;
	}
	(*info)->api = api;
	snprintf((*info)->origin, sizeof((*info)->origin), "%s", origin);
	for (i = 0; i < rewrite.kernel_count; i++) {
		struct cp_ptx_kernel *k = &rewrite.kernels[i];
		bool uses_shadow = false;
		size_t j;

		if (!k->probes || !k->defined)
			continue;
		for (j = 0; j < inject.plan.program_count; j++)
			uses_shadow |= (k->probes >> j & 1) && inject.shadowed &&
				       inject.plan.programs[j].uses_shadow;
		(*info)->kernels[n] = (struct kernel_info){ .name = k->name, .probes = k->probes,
							    .param_count = k->param_count,
							    .param_bytes = k->param_bytes,
							    .uses_shadow = uses_shadow };
		k->name = NULL; /* now the module_info's */
		n++;
	}
	(*info)->kernel_count = n;
	text = rewrite.text;
	rewrite.text = NULL;
	cp_ptx_rewrite__release(&rewrite);
	return text;
fail:
	module_info_free(*info);
	*info = NULL;
	cp_ptx_rewrite__release(&rewrite);
	return NULL;
}

/* The module is loaded: its instrumented kernels are told to cuprobe, its handle remembered. */
static void loaded(const void *handle, struct module_info *info, char **image, bool library)
{
	size_t i;

	info->library = library;
	keep_image(info, image);
	pthread_rwlock_wrlock(&inject.lock);
	if (table_put(&inject.modules, handle, info, handle)) {
		pthread_rwlock_unlock(&inject.lock);
		report(CP_INJECT_ERROR, info->api, NULL, 0, 0,
		       "out of memory: the instrumented module's kernels will launch without their parameter");
		return;
	}
	pthread_rwlock_unlock(&inject.lock);
	for (i = 0; i < info->kernel_count; i++)
		report(CP_INJECT_INSTRUMENTED, info->api, info->kernels[i].name, info->kernels[i].probes,
		       device_arch(), "%s", info->origin);
	/* A context now? Then the maps are registered before anything launches. */
	ensure_registered();
}

/*
 * The driver refused the rewritten module: said, and the original is
 * loaded instead (the program runs as it would have, without probes).
 */
static void rewrite_refused(const char *api, struct module_info *info, CUresult rc)
{
	size_t i;

	for (i = 0; i < info->kernel_count; i++)
		report(CP_INJECT_REFUSED, api, info->kernels[i].name, info->kernels[i].probes, device_arch(),
		       "the driver refused the instrumented module (%s); loaded as it was", result_name(rc));
	module_info_free(info);
}

/* Whole files: read, so that their image can be looked at (cuModuleLoad, cuLibraryLoadFromFile...). */
static void *read_file(const char *path, size_t *size)
{
	struct stat st;
	void *data = NULL;
	ssize_t n;
	size_t got = 0;
	int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;

	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && st.st_size > 0 && (uint64_t)st.st_size < CP_INJECT_PLAN_MAX * 16ull &&
	    (data = malloc((size_t)st.st_size + 1))) {
		while (got < (size_t)st.st_size && (n = read(fd, (char *)data + got, (size_t)st.st_size - got)) > 0)
			got += (size_t)n;
		((char *)data)[got] = '\0';
		*size = got;
	}
	close(fd);
	return data;
}

/* The linked cubin of a rewritten link: modules loaded from it get its kernels. */
static struct module_info *linked_cubin(const void *image)
{
	struct handle_entry *e;
	struct module_info *copy = NULL, *m;
	size_t i;

	pthread_rwlock_rdlock(&inject.lock);
	e = table_find(&inject.links, image);
	m = e ? e->value : NULL;
	if (m && (copy = calloc(1, sizeof(*copy))) &&
	    (copy->kernels = calloc(m->kernel_count ? m->kernel_count : 1, sizeof(*copy->kernels)))) {
		copy->api = m->api;
		for (i = 0; i < m->kernel_count; i++) {
			struct kernel_info *k = &copy->kernels[copy->kernel_count];

			*k = m->kernels[i];
			k->name = strdup(m->kernels[i].name);
			copy->kernel_count += k->name != NULL;
		}
	} else if (copy) {
		free(copy);
		copy = NULL;
	}
	pthread_rwlock_unlock(&inject.lock);
	return copy;
}

static void unloaded(const void *handle)
{
	struct handle_entry *e;
	struct module_info *owned = NULL;
	size_t i;

	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.modules, handle);
	if (e && e->owner == handle)
		owned = e->value;
	if (e) {
		table_remove_owned(&inject.functions, handle);
		/* Modules a library lent (cuLibraryGetModule) go with it, and their functions. */
		for (i = 0; i < inject.modules.capacity; i++) {
			struct handle_entry *alias = &inject.modules.entries[i];

			if (alias->handle && alias->handle != TOMBSTONE && alias->owner == handle &&
			    alias->handle != handle)
				table_remove_owned(&inject.functions, alias->handle);
		}
		table_remove_owned(&inject.modules, handle);
	}
	pthread_rwlock_unlock(&inject.lock);
	module_info_free(owned);
}

CUresult CUDAAPI wrap_cuModuleLoadData(CUmodule *module, const void *image)
{
	struct module_info *info = linked_cubin(image);
	char *text = info ? NULL : instrument("cuModuleLoadData", image, SIZE_MAX, &info);
	CUresult rc = REAL(cuModuleLoadData, module, text ? text : image);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuModuleLoadData", info, rc);
		info = NULL;
		rc = REAL(cuModuleLoadData, module, image);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*module, info, &text, false);
	else
		module_info_free(info);
	free(text);
	return rc;
}

CUresult CUDAAPI wrap_cuModuleLoadDataEx(CUmodule *module, const void *image,
						       unsigned int numOptions, CUjit_option *options,
						       void **optionValues)
{
	struct module_info *info = linked_cubin(image);
	char *text = info ? NULL : instrument("cuModuleLoadDataEx", image, SIZE_MAX, &info);
	CUresult rc = REAL(cuModuleLoadDataEx, module, text ? text : image, numOptions, options,
			   optionValues);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuModuleLoadDataEx", info, rc);
		info = NULL;
		rc = REAL(cuModuleLoadDataEx, module, image, numOptions, options, optionValues);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*module, info, &text, false);
	else
		module_info_free(info);
	free(text);
	return rc;
}

/* A rewritten fatbin is PTX text now, which cuModuleLoadData takes. */
CUresult CUDAAPI wrap_cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	struct module_info *info;
	char *text = instrument("cuModuleLoadFatBinary", fatCubin, SIZE_MAX, &info);
	CUresult rc = text ? REAL(cuModuleLoadData, module, text) : REAL(cuModuleLoadFatBinary, module, fatCubin);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuModuleLoadFatBinary", info, rc);
		info = NULL;
		rc = REAL(cuModuleLoadFatBinary, module, fatCubin);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*module, info, &text, false);
	else
		module_info_free(info);
	free(text);
	return rc;
}

CUresult CUDAAPI wrap_cuModuleLoad(CUmodule *module, const char *fname)
{
	struct module_info *info = NULL;
	size_t size = 0;
	void *file = inject.active ? read_file(fname, &size) : NULL;
	char *text = file ? instrument("cuModuleLoad", file, size + 1, &info) : NULL;
	CUresult rc = text ? REAL(cuModuleLoadData, module, text) : REAL(cuModuleLoad, module, fname);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuModuleLoad", info, rc);
		info = NULL;
		rc = REAL(cuModuleLoad, module, fname);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*module, info, &text, false);
	else
		module_info_free(info);
	free(text);
	free(file);
	return rc;
}

CUresult CUDAAPI wrap_cuModuleUnload(CUmodule hmod)
{
	CUresult rc;

	drain_before_unload(hmod);
	rc = REAL(cuModuleUnload, hmod);

	if (rc == CUDA_SUCCESS)
		unloaded(hmod);
	return rc;
}

CUresult CUDAAPI wrap_cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
					void **jitOptionsValues, unsigned int numJitOptions,
					CUlibraryOption *libraryOptions, void **libraryOptionValues,
					unsigned int numLibraryOptions)
{
	struct module_info *info = linked_cubin(code);
	char *text = info ? NULL : instrument("cuLibraryLoadData", code, SIZE_MAX, &info);
	CUresult rc = REAL(cuLibraryLoadData, library, text ? text : code, jitOptions, jitOptionsValues,
			   numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuLibraryLoadData", info, rc);
		info = NULL;
		rc = REAL(cuLibraryLoadData, library, code, jitOptions, jitOptionsValues, numJitOptions,
			  libraryOptions, libraryOptionValues, numLibraryOptions);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*library, info, &text, true);
	else
		module_info_free(info);
	free(text);
	return rc;
}

CUresult CUDAAPI wrap_cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
					    CUjit_option *jitOptions, void **jitOptionsValues,
					    unsigned int numJitOptions, CUlibraryOption *libraryOptions,
					    void **libraryOptionValues, unsigned int numLibraryOptions)
{
	struct module_info *info = NULL;
	size_t size = 0;
	void *file = inject.active ? read_file(fileName, &size) : NULL;
	char *text = file ? instrument("cuLibraryLoadFromFile", file, size + 1, &info) : NULL;
	CUresult rc;

	if (text)
		rc = REAL(cuLibraryLoadData, library, text, jitOptions, jitOptionsValues, numJitOptions,
			  libraryOptions, libraryOptionValues, numLibraryOptions);
	else
		rc = REAL(cuLibraryLoadFromFile, library, fileName, jitOptions, jitOptionsValues,
			  numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);
	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuLibraryLoadFromFile", info, rc);
		info = NULL;
		rc = REAL(cuLibraryLoadFromFile, library, fileName, jitOptions, jitOptionsValues,
			  numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*library, info, &text, true);
	else
		module_info_free(info);
	free(text);
	free(file);
	return rc;
}

CUresult CUDAAPI wrap_cuLibraryUnload(CUlibrary library)
{
	CUresult rc;

	drain_before_unload(library);
	rc = REAL(cuLibraryUnload, library);

	if (rc == CUDA_SUCCESS)
		unloaded(library);
	return rc;
}

/* ---- linking --------------------------------------------------------------------- */

static void link_created(CUlinkState state)
{
	struct module_info *m = calloc(1, sizeof(*m));

	if (!m)
		return;
	m->api = "cuLinkAddData";
	pthread_rwlock_wrlock(&inject.lock);
	if (table_put(&inject.links, state, m, state))
		module_info_free(m);
	pthread_rwlock_unlock(&inject.lock);
}

CUresult CUDAAPI wrap_cuLinkCreate(unsigned int numOptions, CUjit_option *options,
						 void **optionValues, CUlinkState *stateOut)
{
	CUresult rc = REAL(cuLinkCreate, numOptions, options, optionValues, stateOut);

	if (rc == CUDA_SUCCESS && inject.active)
		link_created(*stateOut);
	return rc;
}

CUresult CUDAAPI wrap_cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options,
						    void **optionValues, CUlinkState *stateOut)
{
	CUresult rc = REAL(cuLinkCreate_v2, numOptions, options, optionValues, stateOut);

	if (rc == CUDA_SUCCESS && inject.active)
		link_created(*stateOut);
	return rc;
}

/* A rewritten input's kernels (and its text) join its link's. */
static void link_added(CUlinkState state, struct module_info *info, char **image)
{
	struct handle_entry *e;
	struct module_info *link;
	struct kernel_info *grown;

	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.links, state);
	link = e ? e->value : NULL;
	grown = link ? realloc(link->kernels, (link->kernel_count + info->kernel_count) * sizeof(*grown)) : NULL;
	if (grown) {
		memcpy(grown + link->kernel_count, info->kernels, info->kernel_count * sizeof(*grown));
		link->kernels = grown;
		link->kernel_count += info->kernel_count;
		info->kernel_count = 0;
		keep_image(link, image);
	}
	pthread_rwlock_unlock(&inject.lock);
	if (!grown)
		report(CP_INJECT_ERROR, "cuLinkAddData", NULL, 0, 0,
		       "a link cuprobe did not see created: its instrumented kernels will launch without their parameter");
}

/* Inputs of kinds that can hold PTX (PTX, fatbin) are rewritten; cubins, objects and libraries pass. */
static char *link_input(const char *api, CUjitInputType type, const void *data, size_t size,
			struct module_info **info)
{
	*info = NULL;
	if (type != CU_JIT_INPUT_PTX && type != CU_JIT_INPUT_FATBINARY && type != CU_JIT_INPUT_CUBIN)
		return NULL;
	return instrument(api, data, type == CU_JIT_INPUT_PTX && size ? size : SIZE_MAX, info);
}

static CUresult link_add(enum hook_id id, CUlinkState state, CUjitInputType type, void *data, size_t size,
			 const char *name, unsigned int numOptions, CUjit_option *options,
			 void **optionValues)
{
	__typeof__(cuLinkAddData_v2) *add = (__typeof__(cuLinkAddData_v2) *)inject_real(id);
	struct module_info *info;
	char *text = add ? link_input(hooks[id].name, type, data, size, &info) : NULL;
	CUresult rc;

	if (!add)
		return CUDA_ERROR_NOT_FOUND;
	if (!text)
		return add(state, type, data, size, name, numOptions, options, optionValues);
	rc = add(state, CU_JIT_INPUT_PTX, text, strlen(text) + 1, name, numOptions, options, optionValues);
	if (rc == CUDA_SUCCESS) {
		link_added(state, info, &text);
		module_info_free(info);
	} else {
		rewrite_refused(hooks[id].name, info, rc);
		rc = add(state, type, data, size, name, numOptions, options, optionValues);
	}
	free(text);
	return rc;
}

CUresult CUDAAPI wrap_cuLinkAddData(CUlinkState state, CUjitInputType type, void *data,
						  size_t size, const char *name, unsigned int numOptions,
						  CUjit_option *options, void **optionValues)
{
	return link_add(HOOK_cuLinkAddData, state, type, data, size, name, numOptions, options,
			optionValues);
}

CUresult CUDAAPI wrap_cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data,
						     size_t size, const char *name,
						     unsigned int numOptions, CUjit_option *options,
						     void **optionValues)
{
	return link_add(HOOK_cuLinkAddData_v2, state, type, data, size, name, numOptions, options,
			optionValues);
}

static CUresult link_add_file(enum hook_id file_id, enum hook_id data_id, CUlinkState state,
			      CUjitInputType type, const char *path, unsigned int numOptions,
			      CUjit_option *options, void **optionValues)
{
	__typeof__(cuLinkAddFile_v2) *add_file = (__typeof__(cuLinkAddFile_v2) *)inject_real(file_id);
	size_t size = 0;
	void *file = inject.active && (type == CU_JIT_INPUT_PTX || type == CU_JIT_INPUT_FATBINARY) ?
		     read_file(path, &size) : NULL;
	struct module_info *info = NULL;
	char *text = file ? instrument(hooks[file_id].name, file, size + 1, &info) : NULL;
	CUresult rc;

	free(file);
	if (!add_file) {
		free(text);
		module_info_free(info);
		return CUDA_ERROR_NOT_FOUND;
	}
	if (!text)
		return add_file(state, type, path, numOptions, options, optionValues);
	rc = ((__typeof__(cuLinkAddData_v2) *)inject_real(data_id))(state, CU_JIT_INPUT_PTX, text,
							      strlen(text) + 1, path, numOptions,
							      options, optionValues);
	if (rc == CUDA_SUCCESS) {
		link_added(state, info, &text);
		module_info_free(info);
	} else {
		rewrite_refused(hooks[file_id].name, info, rc);
		rc = add_file(state, type, path, numOptions, options, optionValues);
	}
	free(text);
	return rc;
}

CUresult CUDAAPI wrap_cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
						  unsigned int numOptions, CUjit_option *options,
						  void **optionValues)
{
	return link_add_file(HOOK_cuLinkAddFile, HOOK_cuLinkAddData, state, type, path, numOptions,
			     options, optionValues);
}

CUresult CUDAAPI wrap_cuLinkAddFile_v2(CUlinkState state, CUjitInputType type,
						     const char *path, unsigned int numOptions,
						     CUjit_option *options, void **optionValues)
{
	return link_add_file(HOOK_cuLinkAddFile_v2, HOOK_cuLinkAddData_v2, state, type, path, numOptions,
			     options, optionValues);
}

CUresult CUDAAPI wrap_cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	CUresult rc = REAL(cuLinkComplete, state, cubinOut, sizeOut);
	struct handle_entry *e;

	if (rc != CUDA_SUCCESS || !cubinOut || !*cubinOut)
		return rc;
	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.links, state);
	/* The cubin stands for the link's kernels until the link is destroyed. */
	if (e && ((struct module_info *)e->value)->kernel_count)
		table_put(&inject.links, *cubinOut, e->value, state);
	pthread_rwlock_unlock(&inject.lock);
	return rc;
}

CUresult CUDAAPI wrap_cuLinkDestroy(CUlinkState state)
{
	struct handle_entry *e;
	struct module_info *m = NULL;

	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.links, state);
	if (e) {
		m = e->value;
		table_remove_owned(&inject.links, state);
	}
	pthread_rwlock_unlock(&inject.lock);
	module_info_free(m);
	return REAL(cuLinkDestroy, state);
}

LOAD_HOOKS(HOOK_EXPORT)
