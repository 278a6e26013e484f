#!/bin/sh
# Installs what building and testing cuprobe needs, from Debian's archive only.
# The CUDA toolkit (/usr/local/cuda) is not a Debian package: where it is
# missing, the CUDA workloads and the libcudart test are simply not built.
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# prometheus (with promtool): the exporter tests; systemd (systemd-analyze) and
# python3-yaml: tools/deploy/ checked by unit_deploy.
apt-get install -y -q --no-install-recommends \
	build-essential cmake pkg-config clang llvm \
	libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev libiberty-dev libncurses-dev \
	libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev \
	golang-github-prometheus-client-model-dev \
	libcriterion-dev libjansson-dev tmux prometheus \
	systemd python3-yaml
