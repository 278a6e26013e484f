// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Module images (userspace/device/fatbin.c) on nvcc's real output, built at
 * build time from tests/data/device/vec_add.cu: fatbins in every
 * compression mode (none; LZ4 by --compress-mode=speed; ZSTD by default,
 * size and balance), a cubin, a SASS-only fatbin; the PTX found for a
 * device compared with `nvcc -ptx` of the same architecture. Then the plan
 * and report encodings of inject_protocol.c, round trip and cut short.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/fatbin.h"
#include "cuprobe_internal.h"
#include "device/inject_protocol.h"
#include "device/loaded_fatbins.h"
#include "helpers.h"

#ifdef DEVICE_DATA_DIR
static void *load(const char *name, size_t *size)
{
	char path[4096];
	char *text;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/%s", DEVICE_DATA_DIR, name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s: %s (built with the tests from tests/data/device)", path, strerror(errno));
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	cr_assert_gt(n, 0);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return text;
}

/* PTX without comments and with whitespace runs collapsed: fatbins keep the code, not the layout. */
static char *normalized(const char *ptx)
{
	char *out = calloc(1, strlen(ptx) + 1), *o = out;
	bool space = false;

	for (; *ptx; ptx++) {
		if (ptx[0] == '/' && ptx[1] == '/') {
			while (*ptx && *ptx != '\n')
				ptx++;
			if (!*ptx)
				break;
		}
		if (*ptx == ' ' || *ptx == '\t' || *ptx == '\n' || *ptx == '\r') {
			space = o != out;
			continue;
		}
		if (space)
			*o++ = ' ';
		space = false;
		*o++ = *ptx;
	}
	return out;
}

static void expect_ptx_of(const char *fatbin_name, unsigned int device_arch, const char *reference,
			  unsigned int expected_arch)
{
	struct cp_image image;
	size_t size, ref_size, len;
	char error[256], *ptx, *ref, *a, *b;
	unsigned int arch = 0;
	void *bytes = load(fatbin_name, &size);

	cr_assert_eq(cp_image__parse(bytes, size, &image, error, sizeof(error)), 0, "%s: %s", fatbin_name,
		     error);
	cr_assert_eq(image.kind, CP_IMAGE_FATBIN);
	cr_assert_eq(image.size, size, "%s: the header's size is the file's", fatbin_name);
	cr_assert_eq(cp_image__ptx_for(&image, device_arch, &ptx, &len, &arch), 0);
	cr_assert_eq(arch, expected_arch, "%s for sm_%u: PTX of compute_%u", fatbin_name, device_arch, arch);
	cr_assert_eq(strlen(ptx), len);
	ref = load(reference, &ref_size);
	a = normalized(ptx);
	b = normalized(ref);
	cr_assert_str_eq(a, b, "%s: the PTX for sm_%u differs from %s", fatbin_name, device_arch, reference);
	free(a);
	free(b);
	free(ref);
	free(ptx);
	cp_image__release(&image);
	free(bytes);
}

Test(fatbin, every_compression_mode_gives_nvccs_ptx)
{
	static const char *const fatbins[] = { "vec_add-none.fatbin", "vec_add-speed.fatbin",
					       "vec_add-default.fatbin", "vec_add-size.fatbin",
					       "vec_add-balance.fatbin" };
	size_t i;

	/* sm_90 gets compute_90; sm_80 and sm_86 the compute_75 entry; newer ones compute_90. */
	for (i = 0; i < sizeof(fatbins) / sizeof(fatbins[0]); i++) {
		expect_ptx_of(fatbins[i], 90, "vec_add-compute_90.ptx", 90);
		expect_ptx_of(fatbins[i], 80, "vec_add-compute_75.ptx", 75);
		expect_ptx_of(fatbins[i], 86, "vec_add-compute_75.ptx", 75);
		expect_ptx_of(fatbins[i], 120, "vec_add-compute_90.ptx", 90);
	}
}

Test(fatbin, entries_list_kind_architecture_and_compression)
{
	struct cp_image image;
	size_t size, i, ptx = 0, elf = 0;
	char error[256];
	void *bytes;

	bytes = load("vec_add-speed.fatbin", &size);
	cr_assert_eq(cp_image__parse(bytes, size, &image, error, sizeof(error)), 0, "%s", error);
	cr_assert_eq(image.entry_count, 3);
	for (i = 0; i < image.entry_count; i++) {
		const struct cp_fatbin_entry *e = &image.entries[i];

		if (e->kind == CP_FATBIN_ENTRY_PTX) {
			ptx++;
			cr_expect(e->flags & CP_FATBIN_FLAG_LZ4, "speed mode compresses PTX with LZ4");
			cr_expect_gt(e->uncompressed_size, e->payload_size);
		} else {
			elf++;
			cr_expect_eq(e->kind, CP_FATBIN_ENTRY_ELF);
			cr_expect_eq(e->arch, 90);
		}
		cr_expect(e->flags & CP_FATBIN_FLAG_64BIT);
	}
	cr_expect_eq(ptx, 2);
	cr_expect_eq(elf, 1);
	cr_expect_str_eq(cp_fatbin_entry__kind_name(CP_FATBIN_ENTRY_PTX), "PTX");
	cp_image__release(&image);
	free(bytes);

	bytes = load("vec_add-size.fatbin", &size);
	cr_assert_eq(cp_image__parse(bytes, size, &image, error, sizeof(error)), 0, "%s", error);
	for (i = 0; i < image.entry_count; i++)
		cr_expect(image.entries[i].flags & CP_FATBIN_FLAG_ZSTD, "size mode compresses with ZSTD");
	cp_image__release(&image);
	free(bytes);
}

Test(fatbin, an_older_device_has_no_ptx)
{
	struct cp_image image;
	unsigned int arch;
	size_t size, len;
	char *ptx;
	void *bytes = load("vec_add-default.fatbin", &size);

	cr_assert_eq(cp_image__parse(bytes, size, &image, NULL, 0), 0);
	cr_expect_eq(cp_image__ptx_for(&image, 70, &ptx, &len, &arch), -ENOENT);
	cp_image__release(&image);
	free(bytes);
}

Test(fatbin, sass_only_fatbins_and_cubins_name_their_kernels)
{
	struct cp_image image;
	unsigned int arch;
	char **names, *ptx;
	size_t size, count, len;
	void *bytes = load("vec_add-sass.fatbin", &size);

	cr_assert_eq(cp_image__parse(bytes, size, &image, NULL, 0), 0);
	cr_expect_eq(cp_image__ptx_for(&image, 90, &ptx, &len, &arch), -ENOENT);
	cr_assert_eq(cp_image__elf_kernels(&image, 90, &names, &count), 0);
	cr_assert_eq(count, 1);
	cr_expect_str_eq(names[0], "vec_add");
	cp_image__free_names(names, count);
	cp_image__release(&image);
	free(bytes);

	bytes = load("vec_add.cubin", &size);
	cr_assert_eq(cp_image__parse(bytes, size, &image, NULL, 0), 0);
	cr_expect_eq(image.kind, CP_IMAGE_ELF);
	cr_expect_eq(image.size, size, "a cubin's extent is the file");
	cr_expect_eq(image.elf_arch, 90);
	cr_expect_eq(cp_image__ptx_for(&image, 90, &ptx, &len, &arch), -ENOENT);
	cr_assert_eq(cp_image__elf_kernels(&image, 90, &names, &count), 0);
	cr_assert_eq(count, 1);
	cr_expect_str_eq(names[0], "vec_add");
	cp_image__free_names(names, count);
	cp_image__release(&image);
	free(bytes);
}

/*
 * A cubin no loaded object's fatbin holds (this test binary has none):
 * none of the three ways finds one; what is not a cubin is refused. (The
 * three ways that find one: root_inject, with nvcc-built libraries.)
 */
Test(loaded_fatbins, a_cubin_from_no_loaded_fatbin_is_not_found)
{
	struct cp_loaded_fatbins loaded = CP_LOADED_FATBINS_INIT;
	struct cp_cubin_fatbin from;
	struct cp_image image, fatbin;
	char *kernels[] = { "vec_add" };
	size_t size;
	void *bytes = load("vec_add.cubin", &size);
	void *fatbin_bytes;

	cr_assert_eq(cp_image__parse(bytes, size, &image, NULL, 0), 0);
	cr_expect_eq(cp_loaded_fatbins__find(&loaded, &image, kernels, 1, 90, &from), -ENOENT);
	/* Twice: the second time from what the first read of each object left. */
	cr_expect_eq(cp_loaded_fatbins__find(&loaded, &image, kernels, 1, 90, &from), -ENOENT);
	fatbin_bytes = load("vec_add-none.fatbin", &size);
	cr_assert_eq(cp_image__parse(fatbin_bytes, size, &fatbin, NULL, 0), 0);
	cr_expect_eq(cp_loaded_fatbins__find(&loaded, &fatbin, kernels, 1, 90, &from), -EINVAL);
	cp_image__release(&fatbin);
	cp_image__release(&image);
	cp_loaded_fatbins__release(&loaded);
	free(fatbin_bytes);
	free(bytes);
}

Test(fatbin, a_wrapper_is_followed_only_in_a_driver_call)
{
	struct {
		uint32_t magic, version;
		const void *data, *unused;
	} wrapper = { CP_FATBIN_WRAPPER_MAGIC, 1, NULL, NULL };
	struct cp_image image;
	char error[256];
	size_t size;
	void *bytes = load("vec_add-none.fatbin", &size);

	wrapper.data = bytes;
	cr_assert_eq(cp_image__parse(&wrapper, SIZE_MAX, &image, error, sizeof(error)), 0, "%s", error);
	cr_expect_eq(image.kind, CP_IMAGE_FATBIN_WRAPPER);
	cr_expect_eq(image.data, bytes);
	cr_expect_eq(image.size, size);
	cp_image__release(&image);
	/* Bytes of a file cannot hold a meaningful pointer. */
	cr_expect_eq(cp_image__parse(&wrapper, sizeof(wrapper), &image, error, sizeof(error)), -EINVAL);
	cr_expect_not_null(strstr(error, "pointer"), "%s", error);
	free(bytes);
}

Test(fatbin, ptx_text_is_its_own_image)
{
	static const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n";
	struct cp_image image;
	unsigned int arch;
	size_t len;
	char *out;

	cr_assert_eq(cp_image__parse(ptx, SIZE_MAX, &image, NULL, 0), 0);
	cr_expect_eq(image.kind, CP_IMAGE_PTX);
	cr_expect_eq(image.size, sizeof(ptx));
	cr_assert_eq(cp_image__ptx_for(&image, 90, &out, &len, &arch), 0);
	cr_expect_str_eq(out, ptx);
	cr_expect_eq(arch, 80);
	free(out);
	cr_expect_eq(cp_image__ptx_for(&image, 75, &out, &len, &arch), -ENOENT,
		     "sm_80 PTX on an sm_75 device");
	/* sm_90a runs on sm_90 only. */
	cr_assert_eq(cp_image__parse(".version 8.0\n.target sm_90a\n", SIZE_MAX, &image, NULL, 0), 0);
	cr_expect_eq(cp_image__ptx_for(&image, 100, &out, &len, &arch), -ENOENT);
	cr_expect_eq(cp_image__ptx_for(&image, 90, &out, &len, &arch), 0);
	free(out);
}

Test(fatbin, cut_and_corrupt_images_are_refused_by_name)
{
	struct cp_image image;
	char error[256];
	size_t size, cut;
	unsigned char *bytes = load("vec_add-default.fatbin", &size);
	unsigned char *copy = malloc(size);

	/* Every prefix: refused or parsed, never read past. */
	for (cut = 0; cut < size; cut += 7) {
		memcpy(copy, bytes, cut);
		cr_expect_neq(cp_image__parse(copy, cut, &image, error, sizeof(error)), 0, "cut at %zu", cut);
	}
	memcpy(copy, bytes, size);
	copy[8] = 0xff; /* a header size beyond the image */
	cr_expect_eq(cp_image__parse(copy, size, &image, error, sizeof(error)), -EINVAL);
	cr_expect_not_null(strstr(error, "fatbin"), "%s", error);
	/* A compressed payload that does not decompress. */
	memcpy(copy, bytes, size);
	memset(copy + size - 200, 0x5a, 150);
	cr_assert_eq(cp_image__parse(copy, size, &image, error, sizeof(error)), 0, "%s", error);
	{
		unsigned char *payload;
		size_t len;

		cr_expect_eq(cp_fatbin_entry__payload(&image.entries[image.entry_count - 1], &payload, &len),
			     -EINVAL);
	}
	cp_image__release(&image);
	cr_expect_eq(cp_image__parse("\x7f" "ELF\x01", 5, &image, error, sizeof(error)), -EINVAL);
	cr_expect_eq(cp_image__parse("\x01\x02\x03\x04", 4, &image, error, sizeof(error)), -ENOEXEC);
	free(copy);
	free(bytes);
}

#endif

#ifdef INJECT_LIBRARY
/*
 * The preload library's exports are the driver functions it wraps (and
 * dlsym): each one must be a name the real driver exports, else programs
 * calling it would have reached nothing without us.
 */
Test(inject_library, every_wrapped_entry_point_is_a_driver_580_export)
{
	char **wrapped, *exports = read_text(EXPORT_LIST), line[256];
	size_t count, i, driver = 0;

	cr_assert_not_null(exports, "%s", EXPORT_LIST);
	cr_assert_eq(cp_elf__exported_functions(INJECT_LIBRARY, &wrapped, &count), 0, "%s", INJECT_LIBRARY);
	for (i = 0; i < count; i++) {
		if (!strcmp(wrapped[i], "dlsym"))
			continue;
		snprintf(line, sizeof(line), "\n%s\n", wrapped[i]);
		cr_expect(strncmp(wrapped[i], "cu", 2) == 0, "%s: not a driver function", wrapped[i]);
		cr_expect_not_null(strstr(exports, line), "%s is not exported by driver 580.159.04", wrapped[i]);
		driver++;
	}
	cr_expect_geq(driver, 40, "%zu driver functions wrapped", driver);
	cp_elf__free_names(wrapped, count);
	free(exports);
}
#endif

/* ---- the protocol ------------------------------------------------------------------- */

Test(inject_protocol, a_plan_survives_its_bytes)
{
	struct cp_inject_program programs[2] = {
		{ .name = "count", .glob = "vec_*", .function = "__cuprobe_gpu_count", .uses_shadow = true },
		{ .name = "leave", .glob = "ns::gemm<*>", .function = "__cuprobe_gpu_leave", .at_exit = true },
	};
	struct cp_inject_map maps[1] = { { .index = 5, .fd = 17, .value_size = 8, .max_entries = 4,
					   .read_only = true, .name = "entries" } };
	struct cp_inject_plan plan = { .magic = 0x1234567890abcdefull, .report_fd = 9, .launch_slots_fd = 11,
				       .launch_slot_count = 65536, .programs = programs, .program_count = 2,
				       .maps = maps, .map_count = 1, .functions = ".func f()\n{\n\tret;\n}\n" };
	struct cp_inject_plan back;
	char error[256];
	void *bytes;
	size_t len, cut;

	cr_assert_eq(cp_inject_plan__encode(&plan, &bytes, &len), 0);
	cr_assert_eq(cp_inject_plan__decode(bytes, len, &back, error, sizeof(error)), 0, "%s", error);
	cr_expect_eq(back.magic, plan.magic);
	cr_expect_eq(back.report_fd, 9);
	cr_expect_eq(back.launch_slots_fd, 11);
	cr_expect_eq(back.launch_slot_count, 65536);
	cr_assert_eq(back.program_count, 2);
	cr_expect_str_eq(back.programs[1].glob, "ns::gemm<*>");
	cr_expect_str_eq(back.programs[1].function, "__cuprobe_gpu_leave");
	cr_expect(back.programs[1].at_exit);
	cr_expect(!back.programs[0].at_exit);
	cr_expect(back.programs[0].uses_shadow);
	cr_expect(!back.programs[1].uses_shadow);
	cr_assert_eq(back.map_count, 1);
	cr_expect_eq(back.maps[0].index, 5);
	cr_expect_eq(back.maps[0].fd, 17);
	cr_expect_eq(back.maps[0].max_entries, 4);
	cr_expect(back.maps[0].read_only);
	cr_expect_str_eq(back.maps[0].name, "entries");
	cr_expect_str_eq(back.functions, plan.functions);
	cp_inject_plan__release(&back);
	for (cut = 0; cut < len; cut++)
		cr_expect_eq(cp_inject_plan__decode(bytes, cut, &back, error, sizeof(error)), -EINVAL,
			     "cut at %zu", cut);
	cr_expect_not_null(strstr(error, "plan"), "%s", error);
	free(bytes);
	/* A map index no translator gives is refused both ways. */
	maps[0].index = CP_INJECT_MAX_MAP_INDEX;
	cr_expect_eq(cp_inject_plan__encode(&plan, &bytes, &len), -EINVAL);
}

Test(inject_protocol, reports_survive_their_bytes_and_long_names_are_cut)
{
	struct cp_inject_report r = { .kind = CP_INJECT_NO_PTX, .pid = 42, .arch = 90, .probes = 5,
				      .api = "cuLibraryLoadData", .name = "_Z3fooPf",
				      .detail = "no PTX for sm_90" };
	unsigned char buf[CP_INJECT_REPORT_MAX];
	char strings[CP_INJECT_REPORT_MAX], *long_name;
	struct cp_inject_report back;
	size_t len, cut;

	len = cp_inject_report__encode(&r, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	cr_assert_eq(cp_inject_report__decode(buf, len, &back, strings, sizeof(strings)), 0);
	cr_expect_eq(back.kind, CP_INJECT_NO_PTX);
	cr_expect_eq(back.pid, 42);
	cr_expect_eq(back.arch, 90);
	cr_expect_eq(back.probes, 5);
	cr_expect_str_eq(back.api, "cuLibraryLoadData");
	cr_expect_str_eq(back.name, "_Z3fooPf");
	cr_expect_str_eq(back.detail, "no PTX for sm_90");
	cr_expect_str_eq(cp_inject_report__kind_name(back.kind), "no_ptx");
	for (cut = 0; cut < len; cut++)
		cr_expect_neq(cp_inject_report__decode(buf, cut, &back, strings, sizeof(strings)), 0,
			      "cut at %zu", cut);

	long_name = malloc(3 * CP_INJECT_REPORT_MAX);
	memset(long_name, 'k', 3 * CP_INJECT_REPORT_MAX - 1);
	long_name[3 * CP_INJECT_REPORT_MAX - 1] = '\0';
	r.name = long_name;
	len = cp_inject_report__encode(&r, buf, sizeof(buf));
	cr_assert_leq(len, CP_INJECT_REPORT_MAX);
	cr_assert_eq(cp_inject_report__decode(buf, len, &back, strings, sizeof(strings)), 0);
	cr_expect_gt(strlen(back.name), 1000, "the name is cut, not dropped");
	cr_expect_str_eq(back.api, "cuLibraryLoadData");
	free(long_name);
}
