// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * format_bench: the consumer's cost per event without BPF: records as the
 * ring hands them (a launch-heavy mix like a training loop's: launches of
 * named kernels, copies, syncs, allocations) fed through the name table and
 * the text and JSON formatters, written to /dev/null through stdio like
 * `cuprobe trace -o /dev/null`.
 *
 * usage: format_bench [EVENTS [ROUNDS]]
 * Prints ns per event for each format (median of ROUNDS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuprobe_internal.h"

#define MIX 16
#define MAX_ROUNDS 32

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void header(struct cp_event_header *hdr, uint32_t type, uint32_t api, uint64_t t)
{
	hdr->type = type;
	hdr->api = api;
	hdr->pid = 4242;
	hdr->tid = 4243;
	hdr->time_ns = t;
}

/* Thirteen launches of three kernels, a copy, a sync, an allocation. */
static void make_mix(union cp_event *mix)
{
	int i;

	memset(mix, 0, MIX * sizeof(*mix));
	for (i = 0; i < 13; i++) {
		struct cp_launch_event *l = &mix[i].launch;

		header(&l->hdr, CP_EV_LAUNCH, CP_API_cuLaunchKernel, 1000000 + i * 1000);
		l->function = 0x7f0000001000ull + (i % 3) * 0x100;
		l->stream = 0x7f0000990000ull;
		l->grid[0] = 128; l->grid[1] = l->grid[2] = 1;
		l->block[0] = 256; l->block[1] = l->block[2] = 1;
		l->device = 0;
	}
	header(&mix[13].copy.hdr, CP_EV_COPY, CP_API_cuMemcpyHtoDAsync_v2, 2000000);
	mix[13].copy.bytes = 1 << 20;
	mix[13].copy.direction = CP_COPY_HTOD;
	mix[13].copy.async = 1;
	mix[13].copy.count = 1;
	header(&mix[14].sync.hdr, CP_EV_SYNC, CP_API_cuStreamSynchronize, 2100000);
	mix[14].sync.kind = CP_SYNC_STREAM;
	mix[14].sync.entry_ns = 2050000;
	header(&mix[15].alloc.hdr, CP_EV_ALLOC, CP_API_cuMemAlloc_v2, 2200000);
	mix[15].alloc.ptr = 0x7f00aa000000ull;
	mix[15].alloc.bytes = 1 << 24;
	mix[15].alloc.kind = CP_MEM_DEVICE;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long events = argc > 1 ? atol(argv[1]) : 1000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5, r, json;
	static const char *const kernels[] = {
		"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
		"_Z14vec_add_kernelPKfS0_Pfi",
		"ampere_sgemm_128x64_tn",
	};
	union cp_event mix[MIX];
	double ns[2][MAX_ROUNDS];
	struct cp_symbolizer *symbolizer = cp_symbolizer__new();
	struct cp_names *names = symbolizer ? cp_names__new(symbolizer) : NULL;
	FILE *out = fopen("/dev/null", "we");
	char line[8192];
	long i;

	if (events < MIX || rounds < 1 || rounds > MAX_ROUNDS || !names || !out) {
		fprintf(stderr, "usage: format_bench [EVENTS >= %d [ROUNDS 1..%d]]\n", MIX, MAX_ROUNDS);
		return 2;
	}
	make_mix(mix);
	for (i = 0; i < 3; i++)
		cp_names__set(names, 4242, 0x7f0000001000ull + i * 0x100, kernels[i]);
	for (r = 0; r < rounds; r++)
		for (json = 0; json < 2; json++) {
			uint64_t start = now_ns();

			for (i = 0; i < events; i++) {
				const union cp_event *event = &mix[i % MIX];
				int n;

				cp_names__observe(names, event);
				n = json ? cp_format__json(event, names, line, sizeof(line)) :
				    cp_format__text(event, names, 0, line, sizeof(line));
				/* As cuprobe trace writes it: one fwrite of the line and its newline. */
				if (n < 0)
					return 1;
				line[n++] = '\n';
				if (fwrite(line, 1, (size_t)n, out) != (size_t)n)
					return 1;
			}
			ns[json][r] = (double)(now_ns() - start) / events;
		}
	for (json = 0; json < 2; json++) {
		qsort(ns[json], rounds, sizeof(double), by_value);
		printf("| %s | %.0f ns per event |\n", json ? "JSON" : "text", ns[json][rounds / 2]);
	}
	printf("(%ld events per round, median of %d rounds; 13 of 16 are launches of named kernels)\n",
	       events, rounds);
	fclose(out);
	cp_names__free(names);
	cp_symbolizer__free(symbolizer);
	return 0;
}
