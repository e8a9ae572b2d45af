# The installed library consumed as a user would: install to a scratch prefix,
# then build a program against it through pkg-config (shared and static) and
# through find_package (shared and static targets), and run each.
source "$(dirname "$0")/lib.sh"
mkdir -p build
prefix=$PWD/build/consumer-prefix
rm -rf "$prefix" build/consumer build/consumer-find
build_tier build/consumer-lib -DCMAKE_C_COMPILER=gcc -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DBUILD_TESTING=OFF -DSHMREG_BUILD_BENCH=OFF -DSHMREG_BUILD_EXAMPLES=OFF
cmake --install build/consumer-lib >/dev/null

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
mkdir -p build/consumer
gcc -o build/consumer/pc-shared tests/consumer/consumer.c $(pkg-config --cflags --libs shmreg) \
  -Wl,-rpath,"$prefix/lib"
gcc -o build/consumer/pc-static tests/consumer/consumer.c $(pkg-config --cflags shmreg) \
  -DSHMREG_STATIC -Wl,-Bstatic $(pkg-config --libs-only-L shmreg) -lshmreg -Wl,-Bdynamic \
  $(pkg-config --static --libs-only-l shmreg | sed 's/-lshmreg//') 
build/consumer/pc-shared
build/consumer/pc-static
# The static binary must not need libshmreg.so at run time.
! ldd build/consumer/pc-static | grep -q libshmreg

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
gcc -o build/consumer/dlopen tests/consumer/consumer_dlopen.c $(pkg-config --cflags shmreg) -ldl
! ldd build/consumer/dlopen | grep -qE 'libshmreg|liburcu'
build/consumer/dlopen "$(ls "$prefix"/lib/libshmreg.so.[0-9]* | head -n 1)"

cmake -S tests/consumer -B build/consumer-find -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/consumer-find -j "$JOBS" >/dev/null
build/consumer-find/consumer-shared
build/consumer-find/consumer-static
echo "consumer: pkg-config and find_package, shared and static, and dlopen: 5 passed, 0 failed"
