#!/bin/sh
# The whole test suite, as CI runs it: install packages, build, run every test,
# then the sanitizer builds: ASan+UBSan (LeakSanitizer on) runs the suite again,
# TSan runs the agent lifecycle programs. Needs root: the integration tests
# load BPF programs and attach uprobes.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "run-all.sh: needs root (BPF integration tests); use sudo" >&2
	exit 1
fi
jobs=$(nproc)
sh tests/install-deps.sh

cmake -S . -B build
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure

# The exporter soak (label soak, ~3 minutes) runs in the plain build only: its
# scrape deadlines are real time, and root_exporter already runs the exporter
# under ASan and LeakSanitizer here.
cmake -S . -B build-asan -DCUPROBE_SANITIZE=address
cmake --build build-asan -j"$jobs"
ctest --test-dir build-asan -LE soak --output-on-failure

cmake -S . -B build-tsan -DCUPROBE_SANITIZE=thread
cmake --build build-tsan -j"$jobs"
ctest --test-dir build-tsan -L lifecycle --output-on-failure
