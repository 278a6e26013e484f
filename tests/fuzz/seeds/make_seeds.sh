#!/bin/sh
# The committed seeds of the fuzz harnesses (corpus/<harness>/), made again:
#   sh tests/fuzz/seeds/make_seeds.sh BUILD_DIR
# from the repository root, BUILD_DIR a configured build (its generated/vmlinux.h).
# record: every catalogued record type alone and two processes' lives
# (seed_records.c, built against cuprobe_events.h); btf_value: the BTF of the
# example programs and of btf_types.bpf.c with a record and map entries of
# their types; elf: small shared libraries and objects (32- and 64-bit,
# stripped, cut short); http_request: request lines; ptx_jit: device
# programs by hand (seed_ptx.c, with the tests' bpf_insns.h). corpus/image
# and corpus/ptx_rewrite are nvcc's and clang's output, committed as they
# are (the build's device test files add to them). Needs clang-14,
# llvm-objcopy-14, bpftool, python3.
set -eu
build=$(cd "$1" && pwd)
cd "$(dirname "$0")/../../.."
seeds=tests/fuzz/seeds
corpus=tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p $corpus/record $corpus/btf_value $corpus/elf $corpus/http_request $corpus/ptx_jit

# record
cc -I userspace -I bpf -o "$tmp/seed_records" $seeds/seed_records.c
"$tmp/seed_records" $corpus/record

# ptx_jit
cc -I tests -o "$tmp/seed_ptx" $seeds/seed_ptx.c
"$tmp/seed_ptx" $corpus/ptx_jit

# btf_value: NAME.btf and the ids of the types named, then seeds packed by python
for src in $seeds/btf_types.bpf.c bpf/examples/*.bpf.c; do
	name=$(basename "$src" .bpf.c)
	clang-14 -g -O2 -target bpf -D__TARGET_ARCH_x86 -I bpf -I "$build/generated" \
		-c "$src" -o "$tmp/$name.o"
	llvm-objcopy-14 --dump-section .BTF="$tmp/$name.btf" "$tmp/$name.o"
	bpftool btf dump file "$tmp/$name.o" > "$tmp/$name.types"
done
python3 - "$tmp" $corpus/btf_value <<'PY'
import glob, os, re, struct, sys
tmp, out = sys.argv[1], sys.argv[2]
for path in sorted(glob.glob(os.path.join(tmp, '*.btf'))):
    name = os.path.basename(path)[:-4]
    blob = open(path, 'rb').read()
    ids = {}
    for line in open(os.path.join(tmp, name + '.types')):
        m = re.match(r"\[(\d+)\] (STRUCT|UNION|TYPEDEF|INT|ENUM) '([^']*)'", line)
        if m:
            ids.setdefault(m.group(3), int(m.group(1)))
    structs = [int(m.group(1)) for m in (re.match(r"\[(\d+)\] STRUCT '(\w+)' size=(\d+)", l)
               for l in open(os.path.join(tmp, name + '.types'))) if m and int(m.group(3)) <= 4096]
    u64 = ids.get('__u64', 0)
    # a record of each struct, and map entries keyed by each struct with its values
    for i, sid in enumerate(structs[-4:]):
        key = structs[-1] if len(structs) > 1 else u64
        data = bytes(range(256)) * 4
        seed = struct.pack('<I', len(blob)) + blob + struct.pack('<IIIB', sid, key, sid, i % 4 * 4 + i % 2) + data
        open(os.path.join(out, '%s-%d' % (name, i)), 'wb').write(seed)
PY

# elf: tiny shared libraries with exported functions, one 32-bit, one stripped, one cut
cat > "$tmp/lib.c" <<'C'
int cuInit(unsigned int flags) { return (int)flags; }
int cuLaunchKernel(void *f) { return f != 0; }
static int hidden(int x) { return x + 1; }
int exported_data = 3;
int cuGetProcAddress(int x) { return hidden(x); }
C
clang-14 -shared -fPIC -nostdlib -Os -o "$tmp/lib64.so" "$tmp/lib.c"
clang-14 -m32 -shared -fPIC -nostdlib -Os -o "$tmp/lib32.so" "$tmp/lib.c"
clang-14 -c -fPIC -Os -o "$tmp/lib.o" "$tmp/lib.c"
cp "$tmp/lib64.so" $corpus/elf/lib64.so
cp "$tmp/lib32.so" $corpus/elf/lib32.so
cp "$tmp/lib.o" $corpus/elf/relocatable.elf
llvm-objcopy-14 --strip-all "$tmp/lib64.so" $corpus/elf/stripped.so
head -c 1024 "$tmp/lib64.so" > $corpus/elf/cut.so

# http_request: method NUL target NUL accept
printf 'GET\0/metrics\0application/openmetrics-text; version=1.0.0' > $corpus/http_request/openmetrics
printf 'GET\0/metrics\0application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3' > $corpus/http_request/protobuf
printf 'HEAD\0/\0' > $corpus/http_request/index
printf 'GET\0/%%6detrics?x=1\0*/*' > $corpus/http_request/escaped
printf 'GET\0/metrics%%00.html\0' > $corpus/http_request/escaped-nul
printf 'POST\0/nope\0' > $corpus/http_request/post
