#!/bin/sh
# One harness as CI runs it (tests/CMakeLists.txt, label fuzz):
#   run.sh replay BINARY SOURCE_DIR HARNESS
#       every committed input once (regressions/HARNESS, corpus/HARNESS);
#   run.sh fuzz BINARY SOURCE_DIR HARNESS SECONDS WORK_DIR [SEEDS_DIR]
#       SECONDS of fuzzing from the committed corpus, WORK_DIR/corpus
#       (what earlier runs found; new inputs go there, never into the
#       sources) and SEEDS_DIR (files the build made, read only). A crash is written to WORK_DIR/crash-*, and the run fails:
#       the input is then committed to regressions/HARNESS once fixed.
# Prints libFuzzer's final numbers (cov:, exec/s, executed units).
set -eu
mode=$1 binary=$2 source=$3 harness=$4
corpus=$source/corpus/$harness
regressions=$source/regressions/$harness
case $mode in
replay)
	set --
	for input in "$regressions"/* "$corpus"/*; do
		if [ -f "$input" ]; then
			set -- "$@" "$input"
		fi
	done
	exec "$binary" "$@"
	;;
fuzz)
	seconds=$5 work=$6 seeds=${7:-}
	mkdir -p "$work/corpus"
	log=$work/fuzz.log
	status=0
	"$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$work/" \
		"$work/corpus" "$corpus" ${seeds:+"$seeds"} > "$log" 2>&1 || status=$?
	grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
	if [ "$status" != 0 ]; then
		tail -n 60 "$log"
		ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null || true
	fi
	exit "$status"
	;;
*)
	echo "run.sh: replay or fuzz, not $mode" >&2
	exit 2
	;;
esac
