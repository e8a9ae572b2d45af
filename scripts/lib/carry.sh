# Sourced by the scripts that run on the GPU machine (tests/cuda/run.sh,
# server/tests/gpu/run.sh, python/tests/gpu/run.sh): that machine has no
# network and lacks some build dependencies (liburcu, xxhash, cmocka,
# libmicrohttpd, RapidJSON, gRPC, maybe pkg-config), so their Debian packages
# travel as .deb files in $SHMREG_CARRY/debs (default .carry/debs, relative
# to the repository root; docs/cuda.md lists them). Sets no shell options.

# unpack_carried PREFIX [PC_NAME...]: unpack every carried .deb into PREFIX
# (emptied first; never into /) and point pkg-config, CMake and the loader
# there. Each PC_NAME (e.g. libmicrohttpd) must then have its .pc file, or
# this returns 1 naming it. A machine with no $SHMREG_CARRY/debs folder (the
# -dev packages installed) gets nothing unpacked and returns 0.
unpack_carried() {
  local prefix=$1; shift
  local carry multiarch=usr/lib/x86_64-linux-gnu deb name
  carry=$(realpath -m "${SHMREG_CARRY:-.carry}")
  rm -rf "$prefix" && mkdir -p "$prefix" || return 1
  [ -d "$carry/debs" ] || return 0
  for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" "$prefix" || return 1; done
  # An architecture-independent package (rapidjson-dev, headers only) keeps
  # its .pc under usr/share.
  local pc=$prefix/$multiarch/pkgconfig share_pc=$prefix/usr/share/pkgconfig file
  for name in "$@"; do
    [ -f "$pc/$name.pc" ] || [ -f "$share_pc/$name.pc" ] ||
      { echo "unpack_carried: no $name.pc among $carry/debs"; return 1; }
  done
  # The .pc files name /usr (as prefix, includedir or in -I/-L flags): point
  # them at the unpacked tree.
  for file in "$pc"/*.pc "$share_pc"/*.pc; do
    [ ! -f "$file" ] || sed -E -i "s#(^[a-z_]+=|-I|-L)/usr#\1$prefix/usr#g" "$file"
  done
  # libmicrohttpd's .pc requires gnutls's .pc for static links only; the GPU
  # machine has the gnutls library (libgnutls.so.30) but not its .pc, and the
  # server links libmicrohttpd as a shared library.
  [ ! -f "$pc/libmicrohttpd.pc" ] || sed -i '/^Requires.private:/d' "$pc/libmicrohttpd.pc"
  export PKG_CONFIG_PATH=$pc:$share_pc
  export CMAKE_PREFIX_PATH=$prefix/usr
  export LD_LIBRARY_PATH=$prefix/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ! command -v pkg-config >/dev/null; then
    export PKG_CONFIG=$prefix/usr/bin/pkgconf
    export PATH=$prefix/usr/bin:$PATH
  fi
}

# install_carried_wheels SITE: install the wheels carried in .whl/ (the
# repository root's; server/bench/gpu/seed_benchmark.py's header lists them:
# perf_analyzer, tritonclient and its dependencies) into SITE with pip
# --no-index --no-deps, and put SITE on PYTHONPATH. Returns 1 when there is
# no .whl/*.whl (the tritonclient tests then skip and the seed benchmark
# needs $PERF_ANALYZER) or pip failed (its log printed).
install_carried_wheels() {
  local site=$1 log
  ls .whl/*.whl >/dev/null 2>&1 || { echo "no .whl/*.whl carried"; return 1; }
  log=$(mktemp)
  if ! python3 -m pip install -q --no-index --no-deps --target "$site" .whl/*.whl >"$log" 2>&1; then
    tail -20 "$log"; rm -f "$log"
    return 1
  fi
  rm -f "$log"
  chmod +x "$site"/perf_analyzer/bin/perf_analyzer 2>/dev/null
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
}
