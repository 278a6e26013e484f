/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Fallback for builds on a machine without /sys/kernel/btf/vmlinux: only the
 * kernel types bpf/ uses, declared with preserve_access_index so CO-RE
 * relocates every field access against the running kernel's BTF at load
 * time. The build prefers a full dump (vmlinux/gen-vmlinux.sh).
 */
#ifndef __VMLINUX_H__
#define __VMLINUX_H__

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };
typedef int pid_t;
typedef __u32 dev_t;

typedef struct { int counter; } atomic_t;

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di;
	unsigned long orig_ax, ip, cs, flags, sp, ss;
};

struct signal_struct {
	atomic_t live;
};

struct super_block {
	dev_t s_dev;
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
};

struct file {
	struct inode *f_inode;
};

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
	unsigned long vm_pgoff;
	struct file *vm_file;
};

struct task_struct {
	pid_t pid;
	pid_t tgid;
	int exit_code;
	struct signal_struct *signal;
};

#pragma clang attribute pop

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};

enum {
	BPF_RB_AVAIL_DATA = 0,
	BPF_RB_RING_SIZE = 1,
	BPF_RB_CONS_POS = 2,
	BPF_RB_PROD_POS = 3,
};

#endif /* __VMLINUX_H__ */
