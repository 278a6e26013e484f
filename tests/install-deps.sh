#!/bin/sh
# Installs what cuprobe needs, from Debian's archive:
#
#   sh tests/install-deps.sh --build   building cuprobe, its workloads and its
#                                      tests (the build compiles them), to use it
#   sh tests/install-deps.sh           that, and what running the tests needs
#
# Running the tests also needs Prometheus (promtool), tmux, lintian, systemd's
# tools and, from npm, Chrome DevTools' trace engine, the parser that
# tests/root_perfetto.c checks `cuprobe trace --perfetto` files with, pinned
# by tests/npm/package-lock.json and installed with `npm ci` into
# $CUPROBE_TEST_NPM_DIR (default /usr/local/lib/cuprobe-tests, where the tests
# look; CMake's CUPROBE_TEST_NPM_DIR). Any failure stops the script.
# The CUDA toolkit (/usr/local/cuda) is not a Debian package: where it is
# missing, the CUDA workloads and the libcudart test are simply not built.
set -eu
export DEBIAN_FRONTEND=noninteractive
repo=$(cd "$(dirname "$0")/.." && pwd)
npm_dir=${CUPROBE_TEST_NPM_DIR:-/usr/local/lib/cuprobe-tests}
case "${1:-}" in
--build) tests=false ;;
"") tests=true ;;
*) echo "usage: install-deps.sh [--build]" >&2; exit 2 ;;
esac

apt-get update -q
# Building: the compilers, libbpf and bpftool, the libraries cuprobe links,
# Criterion and jansson, which the tests the build compiles link, and
# python3.11, which makes the Python line tables the tests read at build time.
apt-get install -y -q --no-install-recommends \
	build-essential cmake pkg-config clang llvm \
	libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev liblz4-dev libiberty-dev libncurses-dev \
	libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev \
	golang-github-prometheus-client-model-dev \
	libcriterion-dev libjansson-dev python3.11
if ! $tests; then
	exit 0
fi
# Testing: prometheus (with promtool): the exporter tests and the alert rules;
# tmux: top in a real terminal; systemd (systemd-analyze) and python3-yaml:
# tools/deploy/ checked by unit_deploy; dpkg-dev (dpkg-shlibdeps: the
# packages' dependencies) and lintian: the Debian packages, built and checked
# by root_package; bash-completion and shellcheck: the bash completion, called
# with and without bash-completion's functions (unit_completion) and checked
# by completion_shellcheck; python3.11 also runs the Python stacks' workloads
# (root_python).
apt-get install -y -q --no-install-recommends \
	tmux prometheus systemd python3-yaml dpkg-dev lintian bash-completion shellcheck
# Node.js and npm from Debian, unless a Node.js with its own npm is installed
# (Debian's npm package conflicts with NodeSource's nodejs).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	apt-get install -y -q --no-install-recommends nodejs npm
fi

mkdir -p "$npm_dir"
cp "$repo/tests/npm/package.json" "$repo/tests/npm/package-lock.json" "$npm_dir/"
npm ci --prefix "$npm_dir" --no-audit --no-fund
