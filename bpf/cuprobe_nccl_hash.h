/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * NCCL's hash of a communicator's ncclUniqueId, as NCCL 2.23 and later
 * compute it (getHash in its bitops.h: eatHash over the 128 bytes, read as
 * sixteen little-endian 64-bit words, then digestHash) and print it as
 * "commId 0x..." in NCCL_DEBUG=INFO's init lines; it is also the
 * communicator's commHash, which its profiler and RAS report. The bytes go
 * in whole words: a byte's sign never matters.
 *
 * A split's child is hashed by NCCL from its parent's hash, the parent's
 * count of splits and the colour, none of them an id: cuprobe does not
 * compute it (comm_id 0). NCCL before 2.23 printed another hash
 * (hashUniqueId) of the same id.
 *
 * Plain C on __u64, for the BPF programs (word by word, as they read them)
 * and for userspace tests alike.
 */
#ifndef CUPROBE_NCCL_HASH_H
#define CUPROBE_NCCL_HASH_H

#include "cuprobe_events.h"

struct cp_nccl_hash {
	__u64 acc[2];
};

/* eatHash's start: the accumulator {1, 1} takes the size first. */
static inline void cp_nccl_hash_begin(struct cp_nccl_hash *h, __u64 size)
{
	h->acc[0] = 1 ^ size;
	h->acc[1] = 1;
}

/* One 8-byte chunk of eatHash: the accumulator mixed, then the word added. */
static inline void cp_nccl_hash_word(struct cp_nccl_hash *h, __u64 word)
{
	h->acc[0] += h->acc[1];
	h->acc[1] ^= h->acc[0];
	h->acc[0] ^= h->acc[0] >> 31;
	h->acc[0] *= 0x9de62bbc8cef3ce3ull;
	h->acc[1] ^= h->acc[1] >> 32;
	h->acc[1] *= 0x485cd6311b599e79ull;
	h->acc[0] += word;
}

/* digestHash. */
static inline __u64 cp_nccl_hash_end(const struct cp_nccl_hash *h)
{
	__u64 x = h->acc[0];

	x ^= x >> 31;
	x *= 0xbac3bd562846de6bull;
	x += h->acc[1];
	x ^= x >> 32;
	x *= 0x995a187a14e7b445ull;
	return x;
}

#endif /* CUPROBE_NCCL_HASH_H */
