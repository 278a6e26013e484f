// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The ELF readers on any file: cp_elf__exported_functions (cuprobe probes
 * --lib), cp_elf__function_offsets of what it found and of the driver's
 * launch function (the tracer's attach), and cp_elf__symbolize at offsets
 * the input names (the symbolizer's lookup).
 *
 * Input: the file. Its last 8 bytes, read as little-endian, also give an
 * offset to symbolize.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuprobe_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	const char *wanted[10];
	uint64_t offsets[10], offset = 0, within;
	char **names = NULL, symbol[256];
	size_t count = 0, n = 0, i;

	if (fd < 0) {
		fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	if (!cp_elf__exported_functions(path, &names, &count)) {
		for (i = 0; i < count && n < 9; i++)
			wanted[n++] = names[i];
		wanted[n++] = "cuLaunchKernel";
		cp_elf__function_offsets(path, wanted, n, offsets);
		for (i = 0; i < n; i++)
			if (offsets[i])
				cp_elf__symbolize(path, offsets[i] + 1, symbol, sizeof(symbol), &within);
		cp_elf__free_names(names, count);
	}
	for (i = 0; i < 8 && i < size; i++)
		offset |= (uint64_t)data[size - 1 - i] << (8 * i);
	cp_elf__symbolize(path, offset, symbol, sizeof(symbol), &within);
	cp_elf__symbolize(path, offset % (size + 1), symbol, sizeof(symbol), NULL);
	return 0;
}
