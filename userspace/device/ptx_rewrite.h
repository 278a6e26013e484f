/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The PTX rewriter: puts device programs into the kernels of a module
 * whose names match the programs' globs.
 *
 * For each matching .entry: a trailing parameter `.param .u64
 * __cuprobe_launch` (the address of the launch's slot, which the launch
 * path passes), the code of each entry program at the start of the body,
 * and of each exit program before every exit (ret, exit, predicated or
 * not: skipped where the exit's guard does not hold). A program's code is
 * its function's body, inline in a block of its own
 * (cp_ptx__inline_block: a call costs the warp a real call). Once per
 * module, after its header, the caller's prelude: the map declarations and
 * the programs' functions, each `.func NAME (.param .b64
 * __cuprobe_launch)`, which the inline code's subprogram calls reach.
 *
 * A module with no matching kernel comes back untouched (no text: the
 * caller passes its own bytes on). What cannot be rewritten safely is
 * refused with one line naming the reason; the caller then loads the
 * module as it was and reports its matching kernels as not instrumented.
 */
#ifndef CUPROBE_DEVICE_PTX_REWRITE_H
#define CUPROBE_DEVICE_PTX_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Probes one module can take: a kernel's matches are a bit mask. */
#define CP_PTX_MAX_PROBES 64

/* The oldest PTX the inserted code may join (the translator emits ISA 6.2, sm_70 code). */
#define CP_PTX_MIN_VERSION_MAJOR 6
#define CP_PTX_MIN_VERSION_MINOR 2
#define CP_PTX_MIN_ARCH 70

/* The name of the parameter added to each instrumented kernel (and of the programs' one). */
#define CP_PTX_LAUNCH_PARAM "__cuprobe_launch"

struct cp_ptx_probe {
	const char *glob;     /* fnmatch(3) on the demangled name without parameters, or the mangled one */
	const char *function; /* the program's .func: NAME (.param .b64 __cuprobe_launch) */
	bool at_exit;         /* before every exit of the kernel; else at its entry */
};

struct cp_ptx_rewrite_opts {
	const struct cp_ptx_probe *probes;
	size_t probe_count;          /* at most CP_PTX_MAX_PROBES */
	const char *prelude;         /* module-scope text put once after the header */
};

/* One .entry of the module, as it was before the rewrite. */
struct cp_ptx_kernel {
	char *name;                  /* as the PTX names it (mangled) */
	uint64_t probes;             /* bit i: probes[i] matched it */
	unsigned int param_count;
	size_t param_bytes;          /* the parameter block; the added one sits at align8(param_bytes) */
	bool defined;                /* a definition, not a declaration */
};

struct cp_ptx_rewrite {
	char *text;                  /* the rewritten module, NUL-terminated; NULL: nothing matched */
	size_t len;
	struct cp_ptx_kernel *kernels; /* every .entry, matched or not */
	size_t kernel_count;
	unsigned int version_major, version_minor; /* .version */
	unsigned int target_arch;    /* .target sm_XY: XY */
};

/*
 * Rewrites the module ptx (len bytes, not necessarily NUL-terminated).
 * 0 with out->text NULL when no kernel matched, 0 with the new text, or a
 * negative errno with one line in error (out->kernels still lists the
 * kernels found, so that the matching ones can be reported): -ENOTSUP for
 * a module this rewriter cannot instrument safely (its reason: PTX too old,
 * 32-bit addresses, a matching kernel referenced from the module, a
 * parameter block that would overflow ...), -EINVAL for text it cannot
 * parse, -ENOMEM.
 */
int cp_ptx__rewrite(const char *ptx, size_t len, const struct cp_ptx_rewrite_opts *opts,
		    struct cp_ptx_rewrite *out, char *error, size_t error_size);
void cp_ptx_rewrite__release(struct cp_ptx_rewrite *rewrite);

/* Does a kernel (its mangled name, as PTX and ELF symbols give it) match glob? */
bool cp_ptx__glob_matches(const char *glob, const char *mangled);

#ifdef __cplusplus
}
#endif

#endif
