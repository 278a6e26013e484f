#!/bin/sh
# Runs the kernel-vs-userspace comparison (cp_compare) in one go and files
# the results: bench/results/compare-TAG.md (machine, exact command,
# table, goals) and compare-TAG.png (gnuplot), raw data in
# compare-TAG-data/.
#
# usage: sudo bench/compare.sh [--build DIR] [--tag TAG] [--results DIR]
#                              [cp_compare options: --workload load|drv_launch|vec_add|gemm,
#                               --quick, --rounds N, --calls N, --exit-runs N, --only LIST, ...]
#
# --build DIR: where bin/ and lib/ are (default: build/ of this checkout).
# Uses bin/cp_compare, or bin/cp_compare_static where the first cannot run
# (a GPU machine without libbpf). Contenders missing on the machine (bpftrace,
# CUPTI, a real driver) are skipped and the table says why.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
tag=local
results="$here/results"
# As run from the repository root, whatever path started it: no machine's paths.
invoked="bench/compare.sh $*"

while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	--tag) tag=$2; shift 2 ;;
	--results) results=$2; shift 2 ;;
	*) break ;;
	esac
done
build=$(cd "$build" && pwd)
mkdir -p "$results"

compare="$build/bin/cp_compare"
if ! "$compare" --help >/dev/null 2>&1; then
	compare="$build/bin/cp_compare_static"
fi
if ! "$compare" --help >/dev/null 2>&1; then
	echo "compare.sh: neither $build/bin/cp_compare nor cp_compare_static runs here" >&2
	exit 1
fi

start=$(date +%s)
table="$results/compare-$tag-table.md"
rm -f "$table"
"$compare" --out "$results" --tag "$tag" "$@"
elapsed=$(( $(date +%s) - start ))

plot_note=""
if command -v gnuplot >/dev/null 2>&1; then
	(cd "$results" && gnuplot "compare-$tag-data/compare.gp")
else
	plot_note="(gnuplot is not installed here: no PNG; run \`gnuplot compare-$tag-data/compare.gp\` elsewhere, in the folder of compare-$tag.md)"
fi

machine() {
	echo "- host: $(uname -srm); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
	echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) online CPUs;" \
		"memory $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	if [ -r /sys/class/dmi/id/product_name ]; then
		echo "- platform: $(cat /sys/class/dmi/id/sys_vendor 2>/dev/null) $(cat /sys/class/dmi/id/product_name)"
	elif grep -q hypervisor /proc/cpuinfo; then
		echo "- platform: virtual machine (hypervisor flag set)"
	fi
	if command -v nvidia-smi >/dev/null 2>&1; then
		echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
	else
		echo "- GPU: none (the simulated driver build/lib/cuda-sim/libcuda.so.1 stands in)"
	fi
	if command -v bpftrace >/dev/null 2>&1; then
		echo "- bpftrace: $(bpftrace --version 2>/dev/null)"
	else
		echo "- bpftrace: not installed"
	fi
	echo "- compare binary: $(basename "$compare")"
}

out="$results/compare-$tag.md"
{
	echo "# Kernel vs userspace tracing: cp_compare on $tag ($(date -u +%Y-%m-%d))"
	echo
	echo "Machine:"
	echo
	machine
	echo
	echo "Command (run as root from the repository root, ${elapsed} s):"
	echo
	echo "    $invoked"
	echo
	echo "Ratios are to the untraced baseline run in the same round; compare ratios, not"
	echo "absolute times across machines (traps are slow in VMs)."
	echo
	cat "$table"
	echo
	echo "![per-call overhead and latency distributions](compare-$tag.png) $plot_note"
	echo
	echo "Raw data: compare-$tag-data/ (per_call.tsv: every run; added.tsv: the bars;"
	echo "latency-*.tsv: the CDFs; compare.gp: the plot)."
} > "$out"
rm -f "$table"
echo "compare.sh: wrote $out and $results/compare-$tag.png in ${elapsed} s" >&2
