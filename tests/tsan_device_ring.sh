#!/bin/bash
# The device ring's lifetime under ThreadSanitizer (the TSan build runs no
# Criterion: tests/CMakeLists.txt): `cuprobe run` with
# bpf/examples/gpu_warp_exits.bpf.c reads the ring the simulated driver
# writes while COMMAND's processes end at random points (exit, exit() from
# a destructor, SIGKILL, SIGKILL holding a reserved slot). Passes when
# cuprobe exits 0 or 1 (no TSan report: TSAN_OPTIONS makes one exit 66) and
# its summary accounts for every record: produced = delivered + lost +
# abandoned, and some were delivered.
#
# usage: tsan_device_ring.sh CUPROBE DRV_LAUNCH PROGRAM [PROCESSES]
set -u
cuprobe=$1 drv_launch=$2 program=$3 processes=${4:-200}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/images"
loop='for i in $(seq 1 '"$processes"'); do
  case $((RANDOM % 4)) in
  0) "$0" 1 >/dev/null ;;
  1) "$0" 1 --exit-in-destructor >/dev/null ;;
  2) "$0" 1 >/dev/null & sleep 0.00$((RANDOM % 3)); kill -9 $! 2>/dev/null; wait $! ;;
  3) CUDA_SIM_RING_KILL_AT=$((RANDOM % 32 + 1)) "$0" 1 >/dev/null ;;
  esac
done
exit 0'
CUDA_SIM_IMAGE_DIR="$dir/images" "$cuprobe" run "$program" --json -o "$dir/out.json" \
	-- /bin/bash -c "$loop" "$drv_launch" 2> "$dir/err"
status=$?
if [ "$status" != 0 ] && [ "$status" != 1 ]; then
	echo "tsan_device_ring: cuprobe exited $status" >&2
	cat "$dir/err" >&2
	exit 1
fi
summary=$(grep -o 'device ring warp_exits: [0-9]* records produced, [0-9]* delivered, [0-9]* lost, [0-9]* abandoned' "$dir/err")
if [ -z "$summary" ]; then
	echo "tsan_device_ring: no device ring summary" >&2
	cat "$dir/err" >&2
	exit 1
fi
set -- $(echo "$summary" | tr -cs '0-9' ' ')
echo "tsan_device_ring: $summary"
if [ "$1" != $(($2 + $3 + $4)) ] || [ "$2" = 0 ]; then
	echo "tsan_device_ring: records unaccounted for" >&2
	exit 1
fi
