# Sourced: the build chain of the KServe v2 server (server/), as a user
# builds it: the library installed to a prefix, the server built against
# that installed package with find_package. Used by the CI tiers
# (scripts/tests.d/lib.sh), scripts/run.sh, server/tests/gpu/run.sh and
# server/bench/triton_compare/run.sh. Call from the repository root; sets no
# shell options. JOBS: parallel build jobs (default 2).
#
# Environment read by build_server:
#   SERVER_WERROR=OFF        build both without -Werror (default ON: the CI's
#                            compilers are the ones the code is held to); it
#                            sets the CMake options SHMREG_WERROR of the
#                            library and SERVER_WERROR of the server
#   SERVER_LIB_CMAKE_ARGS    more cmake arguments for the library, e.g.
#                            "-DSHMREG_WITH_CUDA=ON"

# build_server DIR [server cmake args...]: install the library to
# DIR/prefix (DIR/lib its build) and build server/ against it in DIR/app
# (RelWithDebInfo unless the args say otherwise). Leaves the binary at
# DIR/app/shmreg-server. Incremental: a second call rebuilds nothing.
build_server() {
  local dir werror=${SERVER_WERROR:-ON}
  dir=$(realpath -m "$1"); shift
  mkdir -p "$dir" || return 1
  # shellcheck disable=SC2086 # SERVER_LIB_CMAKE_ARGS is a list of words
  server_cmake . "$dir/lib" -DSHMREG_WERROR="$werror" -DBUILD_TESTING=OFF \
    -DSHMREG_BUILD_EXAMPLES=OFF -DSHMREG_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$dir/prefix" \
    ${SERVER_LIB_CMAKE_ARGS:-} || return 1
  rm -rf "$dir/prefix"
  cmake --install "$dir/lib" >/dev/null || return 1
  server_cmake server "$dir/app" -DSERVER_WERROR="$werror" \
    -DCMAKE_PREFIX_PATH="$dir/prefix${CMAKE_PREFIX_PATH:+;$CMAKE_PREFIX_PATH}" "$@"
}

# server_cmake SOURCE BUILD [cmake args...]: configure (log kept beside the
# build, printed on failure) and build, RelWithDebInfo unless the args say
# otherwise.
server_cmake() {
  local src=$1 out=$2; shift 2
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$out.configure.log" 2>&1 \
    || { cat "$out.configure.log"; return 1; }
  cmake --build "$out" -j "${JOBS:-2}"
}
