# Sourced by the checks in tests/gpu/: the bundle, a scratch folder removed at
# exit, and the system-wide watchers (cuprobe stats, run, exporter) each check
# starts first and stops with SIGINT, as a user would.
# After `. common.sh NAME`: $here (this checkout), $bundle (BUNDLE, default
# gpu-bundle/ of this checkout), $cuprobe, $out (OUT, default
# /tmp/cuprobe-NAME), $work; PYTHONPATH finds checks.py.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bundle=${BUNDLE:-$here/gpu-bundle}
cuprobe=$bundle/bin/cuprobe
out=${OUT:-/tmp/cuprobe-$1}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONPATH="$here/tests/gpu${PYTHONPATH:+:$PYTHONPATH}"
watchers=()

stop_watchers() { # SIGINT to each, then wait for it
	local p
	for p in "${watchers[@]}"; do kill -INT "$p" 2>/dev/null; done
	for p in "${watchers[@]}"; do wait "$p"; done
	watchers=()
}
trap 'stop_watchers; rm -rf "$work"' EXIT

start_watcher() { # NAME COMMAND...: in the background, its stderr in $work/NAME.err
	local name=$1
	shift
	"$@" 2> "$work/$name.err" &
	watchers+=($!)
}

wait_attached() { # NAME...: until each watcher says it is attached (-v); exit 1 when one does not
	local name i
	for name; do
		for i in $(seq 1 600); do
			grep -q "Ctrl-C stops\|tracing (" "$work/$name.err" 2>/dev/null && break
			sleep 0.1
		done
		grep -q "Ctrl-C stops\|tracing (" "$work/$name.err" ||
			{ echo "$name did not start:"; cat "$work/$name.err"; exit 1; }
	done
}
