/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The machine's ptxas (CUDA toolkit) as the judge of the PTX cuprobe makes. */
#ifndef CUPROBE_TEST_PTXAS_H
#define CUPROBE_TEST_PTXAS_H

#include <stdbool.h>

/*
 * Skips the running test, saying so, where the toolkit has no ptxas; where
 * it has one, nothing (what it then refuses is a failure).
 */
void require_ptxas(void);
/*
 * The oldest target judged: sm_70 where this ptxas still compiles for it,
 * else the oldest it has (sm_75 since CUDA 13).
 */
const char *ptxas_oldest_arch(void);
/* Compiles the module text for arch (sm_XY); fails the test with ptxas's messages if refused. */
void assert_ptxas_accepts(const char *module, const char *arch, const char *what);

#endif
