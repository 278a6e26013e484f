#!/bin/sh
# Installs what building and testing cuprobe needs, from Debian's archive and,
# for the tests, from npm: Chrome DevTools' trace engine, the parser that
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

apt-get update -q
# prometheus (with promtool): the exporter tests and the alert rules; systemd
# (systemd-analyze) and python3-yaml: tools/deploy/ checked by unit_deploy;
# dpkg-dev (dpkg-shlibdeps: the packages' dependencies) and lintian:
# the Debian packages, built and checked by root_package; bash-completion and
# shellcheck: the bash completion, called with and without bash-completion's
# functions (unit_completion) and checked by completion_shellcheck; python3.11:
# the Python stacks' workloads and line tables (root_python, unit_python).
apt-get install -y -q --no-install-recommends \
	build-essential cmake pkg-config clang llvm \
	libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev liblz4-dev libiberty-dev libncurses-dev \
	libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev \
	golang-github-prometheus-client-model-dev \
	libcriterion-dev libjansson-dev tmux prometheus \
	systemd python3-yaml dpkg-dev lintian bash-completion shellcheck python3.11
# Node.js and npm from Debian, unless a Node.js with its own npm is installed
# (Debian's npm package conflicts with NodeSource's nodejs).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	apt-get install -y -q --no-install-recommends nodejs npm
fi

mkdir -p "$npm_dir"
cp "$repo/tests/npm/package.json" "$repo/tests/npm/package-lock.json" "$npm_dir/"
npm ci --prefix "$npm_dir" --no-audit --no-fund
