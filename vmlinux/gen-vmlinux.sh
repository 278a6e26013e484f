#!/bin/sh
# Writes vmlinux.h for the BPF build: a full dump of the running kernel's BTF
# when there is one, otherwise the minimal CO-RE fallback beside this script.
# usage: gen-vmlinux.sh BPFTOOL OUTPUT FALLBACK
set -eu
bpftool=$1 out=$2 fallback=$3
btf=${CUPROBE_VMLINUX_BTF:-/sys/kernel/btf/vmlinux}
if [ -r "$btf" ] && "$bpftool" btf dump file "$btf" format c > "$out.tmp" 2>/dev/null; then
	mv "$out.tmp" "$out"
	echo "vmlinux.h: dumped from $btf"
else
	rm -f "$out.tmp"
	cp "$fallback" "$out"
	echo "vmlinux.h: no readable kernel BTF at $btf, using the fallback $fallback"
fi
