// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer harness: module images (userspace/device/fatbin.c) as a file
 * holds them (a bound, so a wrapper's pointer is never followed): parse,
 * find PTX for two devices, name the cubins' kernels, decompress every
 * entry. Seeds: tests/fuzz/corpus/image and the images built for the tests.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fatbin.h"

/* Larger payloads are real in big libraries, but not worth the fuzzer's memory. */
#define FUZZ_MAX_PAYLOAD (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned int archs[] = { 75, 90, 100 };
	struct cp_image image;
	char error[256], **names, *ptx;
	size_t i, count, len;
	unsigned int arch;

	if (cp_image__parse(data, size, &image, error, sizeof(error)))
		return 0;
	for (i = 0; i < image.entry_count; i++)
		if (image.entries[i].uncompressed_size > FUZZ_MAX_PAYLOAD ||
		    image.entries[i].payload_size > FUZZ_MAX_PAYLOAD)
			goto out;
	for (i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
		if (!cp_image__ptx_for(&image, archs[i], &ptx, &len, &arch))
			free(ptx);
	if (!cp_image__elf_kernels(&image, 90, &names, &count))
		cp_image__free_names(names, count);
	for (i = 0; i < image.entry_count; i++) {
		unsigned char *payload;

		if (!cp_fatbin_entry__payload(&image.entries[i], &payload, &len))
			free(payload);
	}
out:
	cp_image__release(&image);
	return 0;
}
