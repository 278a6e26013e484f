/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef CUPROBE_VEC_ADD_PTX_H
#define CUPROBE_VEC_ADD_PTX_H
/*
 * extern "C" __global__ void vec_add(const float *a, const float *b,
 *                                    float *c, int n)
 * { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
 *
 * From `nvcc -ptx -arch=compute_75` (CUDA 13.0), with .version lowered
 * from 9.0 to 7.5 (nothing newer is used; ptxas accepts it for sm_75 and
 * sm_90) so that drivers back to CUDA 11.5 can JIT it, 580 included.
 */
static const char vec_add_ptx[] =
	".version 7.5\n"
	".target sm_75\n"
	".address_size 64\n"
	"\n"
	".visible .entry vec_add(\n"
	"\t.param .u64 vec_add_param_0,\n"
	"\t.param .u64 vec_add_param_1,\n"
	"\t.param .u64 vec_add_param_2,\n"
	"\t.param .u32 vec_add_param_3\n"
	")\n"
	"{\n"
	"\t.reg .pred \t%p<2>;\n"
	"\t.reg .f32 \t%f<4>;\n"
	"\t.reg .b32 \t%r<6>;\n"
	"\t.reg .b64 \t%rd<11>;\n"
	"\n"
	"\tld.param.u64 \t%rd1, [vec_add_param_0];\n"
	"\tld.param.u64 \t%rd2, [vec_add_param_1];\n"
	"\tld.param.u64 \t%rd3, [vec_add_param_2];\n"
	"\tld.param.u32 \t%r2, [vec_add_param_3];\n"
	"\tmov.u32 \t%r3, %ctaid.x;\n"
	"\tmov.u32 \t%r4, %ntid.x;\n"
	"\tmov.u32 \t%r5, %tid.x;\n"
	"\tmad.lo.s32 \t%r1, %r3, %r4, %r5;\n"
	"\tsetp.ge.s32 \t%p1, %r1, %r2;\n"
	"\t@%p1 bra \t$L__BB0_2;\n"
	"\n"
	"\tcvta.to.global.u64 \t%rd4, %rd1;\n"
	"\tmul.wide.s32 \t%rd5, %r1, 4;\n"
	"\tadd.s64 \t%rd6, %rd4, %rd5;\n"
	"\tcvta.to.global.u64 \t%rd7, %rd2;\n"
	"\tadd.s64 \t%rd8, %rd7, %rd5;\n"
	"\tld.global.f32 \t%f1, [%rd8];\n"
	"\tld.global.f32 \t%f2, [%rd6];\n"
	"\tadd.f32 \t%f3, %f2, %f1;\n"
	"\tcvta.to.global.u64 \t%rd9, %rd3;\n"
	"\tadd.s64 \t%rd10, %rd9, %rd5;\n"
	"\tst.global.f32 \t[%rd10], %f3;\n"
	"\n"
	"$L__BB0_2:\n"
	"\tret;\n"
	"\n"
	"}\n"
	"\n";
#endif
