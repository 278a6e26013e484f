// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * graph_replay: a CUDA graph captured once and replayed N times, so a
 * tracer sees cuGraphLaunch (one per replay) and not the kernels inside.
 *
 * usage: graph_replay REPLAYS [KERNELS_PER_GRAPH]
 * prints: graph_replay: graph_launches=N kernels_per_graph=K direct_launches=1 result=ok
 * (one direct launch warms the kernel up before the capture)
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define ELEMENTS 4096

__global__ void graph_step_kernel(float *data, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		data[i] += 1.0f;
}

static void check(cudaError_t rc, const char *call)
{
	if (rc == cudaSuccess)
		return;
	fprintf(stderr, "graph_replay: %s failed: %s\n", call, cudaGetErrorString(rc));
	exit(EXIT_FAILURE);
}

static long parse(const char *text, long min, long max)
{
	char *end;
	long value = strtol(text, &end, 10);

	if (*text == '\0' || *end || value < min || value > max) {
		fprintf(stderr, "usage: graph_replay REPLAYS [KERNELS_PER_GRAPH 1-64]\n");
		exit(2);
	}
	return value;
}

int main(int argc, char **argv)
{
	long replays, kernels = 4, i;
	cudaGraphExec_t exec;
	cudaStream_t stream;
	cudaGraph_t graph;
	float *data, host[ELEMENTS];

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: graph_replay REPLAYS [KERNELS_PER_GRAPH 1-64]\n");
		return 2;
	}
	replays = parse(argv[1], 1, 100000000L);
	if (argc == 3)
		kernels = parse(argv[2], 1, 64);
	check(cudaMalloc(&data, sizeof(host)), "cudaMalloc");
	check(cudaMemset(data, 0, sizeof(host)), "cudaMemset");
	check(cudaStreamCreate(&stream), "cudaStreamCreate");
	graph_step_kernel<<<ELEMENTS / 256, 256, 0, stream>>>(data, ELEMENTS);
	check(cudaGetLastError(), "warm-up launch");
	check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

	check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
	for (i = 0; i < kernels; i++)
		graph_step_kernel<<<ELEMENTS / 256, 256, 0, stream>>>(data, ELEMENTS);
	check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
	check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
	for (i = 0; i < replays; i++)
		check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
	check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

	check(cudaMemcpy(host, data, sizeof(host), cudaMemcpyDeviceToHost), "cudaMemcpy");
	for (i = 0; i < ELEMENTS; i++) {
		if (host[i] != (float)(1 + replays * kernels)) {
			fprintf(stderr, "graph_replay: wrong result %g at %ld\n", host[i], i);
			return 1;
		}
	}
	check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
	check(cudaGraphDestroy(graph), "cudaGraphDestroy");
	check(cudaStreamDestroy(stream), "cudaStreamDestroy");
	check(cudaFree(data), "cudaFree");
	printf("graph_replay: graph_launches=%ld kernels_per_graph=%ld direct_launches=1 result=ok\n",
	       replays, kernels);
	return 0;
}
