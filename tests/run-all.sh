#!/bin/sh
# The whole test suite, as CI runs it: install packages, build, run every test.
# Needs root: the integration tests load BPF programs and attach uprobes.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "run-all.sh: needs root (BPF integration tests); use sudo" >&2
	exit 1
fi
sh tests/install-deps.sh
cmake -S . -B build
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure
