#!/usr/bin/env bash
# The device carry of NOTES.md §25 (w4m): the working tree is ~60 MB, so two statically linked test_moe / bench_moe
# (~3 MB each after xz) no longer fit under the 64 MiB limit. This relinks them against ONE shared library of the
# moe_kernels objects (no relocatable device code, objects built -fPIC) and xz-compresses the three files (~3.3 MB).
# run_w4m.sh unpacks libmoe_kernels.so into /tmp and sets LD_LIBRARY_PATH.
# Usage: BUILD=build-w4g DEST=build-carry/w4m bash kernels/moe/w4m_carry.sh   (after building test_moe bench_moe)
set -eu
BUILD=${BUILD:-build-w4g}; DEST=${DEST:-build-carry/w4m}
M=$BUILD/kernels/moe; T=$(mktemp -d); CU=/usr/local/cuda/lib
L="-L$T -lmoe_kernels -Wl,-rpath,$CU $CU/libcudart.so $CU/libcublas.so $CU/libculibos.a $CU/libcublasLt.so -lrt -lpthread -ldl"
g++ -shared -o "$T/libmoe_kernels.so" "$M"/CMakeFiles/moe_kernels.dir/*.o $CU/libcudart.so $CU/libcublas.so $CU/libcublasLt.so -Wl,-rpath,$CU
g++ -O3 "$M"/CMakeFiles/test_moe.dir/*.cu.o -o "$T/test_moe" /usr/lib/x86_64-linux-gnu/libgtest_main.a /usr/lib/x86_64-linux-gnu/libgtest.a $L
g++ -O3 "$M"/CMakeFiles/bench_moe.dir/bench_moe.cu.o -o "$T/bench_moe" $L
strip "$T/libmoe_kernels.so" "$T/test_moe" "$T/bench_moe"
mkdir -p "$DEST"; rm -f "$DEST"/*
for f in libmoe_kernels.so test_moe bench_moe; do xz -9e -T2 -c "$T/$f" > "$DEST/$f.xz"; done
rm -rf "$T"; ls -la "$DEST"
