# The installed library consumed as a user would: install to a scratch prefix,
# then build a program against it through pkg-config (shmreg.pc shared,
# shmreg-static.pc static), through find_package (the shared library, and the
# static component), and through dlopen, and run each. With a CUDA-enabled
# install the shared library must configure and link with the CUDA toolkit
# hidden; a program in a private prefix runs through an rpath or
# LD_LIBRARY_PATH (the README's recipes).
source "$(dirname "$0")/lib.sh"
mkdir -p build
prefix=$PWD/build/consumer-prefix
out=build/consumer
rm -rf "$prefix" "$out" build/consumer-find build/consumer-nocuda build/consumer-static-nocuda
build_tier build/consumer-lib -DCMAKE_C_COMPILER=gcc -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DBUILD_TESTING=OFF -DSHMREG_BUILD_BENCH=OFF -DSHMREG_BUILD_EXAMPLES=OFF
cmake --install build/consumer-lib >/dev/null
cuda=$(sed -n 's/^set(shmreg_WITH_CUDA \(.*\))$/\1/p' "$prefix/lib/cmake/shmreg/shmregConfig.cmake")
echo "consumer: the installed library has CUDA backends: $cuda"
passed=0
ok() { passed=$((passed + 1)); echo "consumer: passed: $*"; }
fail() { echo "consumer: FAILED: $*"; exit 1; }
# check DESCRIPTION COMMAND...: COMMAND must succeed. (set -e does not stop
# the tier on a command that fails on the left of an and-list.)
check() { local what=$1; shift; "$@" || fail "$what"; ok "$what"; }
no_libshmreg() { ! ldd "$1" | grep -q libshmreg || fail "$1 needs libshmreg.so at run time"; }

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
mkdir -p "$out"
# shmreg.pc is the shared library: nothing of CUDA (no build-machine folder),
# nothing of liburcu.
! grep -qiE 'cuda|urcu' "$prefix/lib/pkgconfig/shmreg.pc" || fail "shmreg.pc names CUDA or liburcu"
gcc -o "$out/pc-shared" tests/consumer/consumer.c $(pkg-config --cflags --libs shmreg) \
  -Wl,-rpath,"$prefix/lib"
check "pkg-config shmreg, -Wl,-rpath to the private prefix" "$out/pc-shared"
gcc -o "$out/pc-shared-norpath" tests/consumer/consumer.c $(pkg-config --cflags --libs shmreg)
check "pkg-config shmreg, LD_LIBRARY_PATH" env LD_LIBRARY_PATH="$prefix/lib" "$out/pc-shared-norpath"

# The installed .pc files name no folder of this machine outside their own
# prefix (shmreg-static.pc once named the CUDA toolkit's): every absolute
# path in them lies under the prefix. (What their Requires bring, liburcu's
# flags, is the consumer's machine's own.)
outside_prefix() {
  grep -ohE '(^|[[:space:]=]|-[LI])/[^[:space:]]*' "$1" | sed -E 's/^[[:space:]=]*(-[LI])?//' \
    | awk -v p="$prefix" '$0 != p && index($0, p "/") != 1'
}
printf 'prefix=%s\nLibs: -L%s/lib -L/opt/cuda/lib64 -lcudart_static\n' "$prefix" "$prefix" >"$out/leaky.pc"
[ "$(outside_prefix "$out/leaky.pc")" = /opt/cuda/lib64 ] || fail "the folder check misses a leaked -L"
for pc in shmreg shmreg-static; do
  stray=$(outside_prefix "$prefix/lib/pkgconfig/$pc.pc")
  [ -z "$stray" ] || fail "$pc.pc names folders outside $prefix: $stray"
  ok "$pc.pc names no folder outside its prefix"
done
[ "$(pkg-config --variable=cuda shmreg-static)" = "$cuda" ] || fail "shmreg-static.pc's cuda variable is not $cuda"
# A CUDA archive needs the consumer's own toolkit folder, as README says.
cuda_ldflags=
if [ "$cuda" = ON ]; then
  cudart=$(sed -n 's/^CUDA_cudart_static_LIBRARY:FILEPATH=//p' build/consumer-lib/CMakeCache.txt)
  [ -f "$cudart" ] || fail "no CUDA_cudart_static_LIBRARY in the build's cache"
  cuda_ldflags=-L$(dirname "$cudart")
fi
gcc -o "$out/pc-static" tests/consumer/consumer.c $(pkg-config --cflags --libs shmreg-static) $cuda_ldflags
no_libshmreg "$out/pc-static"
check "pkg-config shmreg-static (the archive)" "$out/pc-static"

# The C++ header from the same package: pkg-config and find_package, each
# with exceptions and with -fno-exceptions.
cpp=build/consumer-cpp
rm -rf "$cpp" build/consumer-cpp-find
mkdir -p "$cpp"
for mode in exceptions noexceptions; do
  flags=$([ "$mode" = exceptions ] || echo -fno-exceptions)
  g++ -std=c++17 -Wall -Wextra -Wpedantic -Werror $flags -o "$cpp/pc-$mode" tests/consumer/consumer_cpp.cpp \
    $(pkg-config --cflags --libs shmreg) -Wl,-rpath,"$prefix/lib"
  "$cpp/pc-$mode"
done
cmake -S tests/consumer/cpp -B build/consumer-cpp-find -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/consumer-cpp-find -j "$JOBS" >/dev/null
build/consumer-cpp-find/consumer-cpp
build/consumer-cpp-find/consumer-cpp-noexceptions
echo "consumer: C++ header, pkg-config and find_package, with and without exceptions: 4 passed, 0 failed"

# Loaded at run time, with neither libshmreg nor liburcu loaded at startup.
gcc -o "$out/dlopen" tests/consumer/consumer_dlopen.c $(pkg-config --cflags shmreg) -ldl
! ldd "$out/dlopen" | grep -qE 'libshmreg|liburcu' || fail "the dlopen consumer links libshmreg or liburcu"
check "dlopen" "$out/dlopen" "$(ls "$prefix"/lib/libshmreg.so.[0-9]* | head -n 1)"

# find_package with the static component, toolkit visible.
cmake -S tests/consumer -B build/consumer-find -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/consumer-find -j "$JOBS" >/dev/null
check "find_package(shmreg 1.0): shmreg::shmreg" build/consumer-find/consumer-shared
no_libshmreg build/consumer-find/consumer-static
check "find_package(shmreg 1.0 COMPONENTS static): shmreg::shmreg_static" build/consumer-find/consumer-static

# find_package of the shared library with the CUDA toolkit hidden, then
# installed with CMAKE_INSTALL_RPATH: it runs from its own prefix.
app=$PWD/$out/app
cmake -S tests/consumer -B build/consumer-nocuda -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_STATIC=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_INSTALL_PREFIX="$app" \
  -DCMAKE_INSTALL_RPATH="$prefix/lib" >build/consumer-nocuda.log 2>&1 \
  || { cat build/consumer-nocuda.log; fail "find_package(shmreg) with the CUDA toolkit hidden"; }
cmake --build build/consumer-nocuda -j "$JOBS" >/dev/null
cmake --install build/consumer-nocuda >/dev/null
readelf -d "$app/bin/consumer-shared" | grep -E 'RUNPATH|RPATH' | grep -qF "$prefix/lib" \
  || fail "the installed consumer has no rpath to $prefix/lib"
check "shmreg::shmreg with the CUDA toolkit hidden, installed with CMAKE_INSTALL_RPATH" "$app/bin/consumer-shared"
check "dlopen, built by find_package" \
  build/consumer-nocuda/consumer-dlopen "$(ls "$prefix"/lib/libshmreg.so.[0-9]* | head -n 1)"

# The static component of a CUDA build does need the toolkit, and says so.
if [ "$cuda" = ON ]; then
  log=build/consumer-static-nocuda.log
  if cmake -S tests/consumer -B build/consumer-static-nocuda -DCMAKE_PREFIX_PATH="$prefix" \
       -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON >"$log" 2>&1; then
    fail "COMPONENTS static configured with the CUDA toolkit hidden"
  fi
  grep -q 'static component needs CUDAToolkit' "$log" || { cat "$log"; fail "no message naming CUDAToolkit"; }
  ok "COMPONENTS static without the CUDA toolkit fails, naming it"
fi
# The suppression files a consumer's own runs use, from where they are
# installed (README, "Testing your integration").
supp=$prefix/share/shmreg
[ -f "$supp/tsan.supp" ] && [ -f "$supp/valgrind.supp" ] || fail "no suppression files in $supp"
if command -v valgrind >/dev/null; then
  check "valgrind with the installed valgrind.supp: no error, no leak" \
    valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --suppressions="$supp/valgrind.supp" \
    "$out/dlopen" "$(ls "$prefix"/lib/libshmreg.so.[0-9]* | head -n 1)"
fi
echo "consumer: $passed passed, 0 failed"
