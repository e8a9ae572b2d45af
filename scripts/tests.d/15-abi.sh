# The build's contract, checked on the shared library built with CUDA and UCX
# (where found) and without either (docs/abi.md):
#  - every .c/.cpp under src/, tests/, bench/, examples/, server/ is compiled by some
#    build: the union of the compile_commands.json of both builds and of the
#    projects of their own (server/, tests/consumer), configured
#    against each build's installed package (with the CUDA toolkit hidden for
#    the CUDA-off one);
#  - libshmreg.so exports only shmreg_* functions, each at a SHMREG_1.x
#    version, and every function the public headers declare;
#  - its ABI, as abidw records it from the public headers, against the baseline
#    abi/libshmreg.abi: an incompatible change fails; a compatible addition
#    passes with the report, and the baseline should be re-recorded in the
#    same change (scripts/abi-baseline.sh).
# Without a CUDA toolkit only the CUDA-off build is checked, and the sources
# are not (the CUDA-only ones would look orphaned).
source "$(dirname "$0")/lib.sh"
mkdir -p build
baseline=abi/libshmreg.abi
failed=0
fail() { echo "15-abi: FAILED: $*"; failed=$((failed + 1)); }

# A project of its own is a CMakeLists.txt with an unindented project() call
# (examples/CMakeLists.txt calls project() only when built alone, indented).
standalone=$(find src tests bench examples server -name CMakeLists.txt -exec grep -l '^project(' {} + \
             | xargs -r -n1 dirname | sort || true)

# The public functions: the name before the first '(' of each SHMREG_API
# declaration, declarations joined across lines, in every public header
# (shmreg.h and the supplements beside it that it includes).
header_functions() {
  cat include/shmreg/*.h | grep -v '^#' | tr '\n' ' ' | grep -o 'SHMREG_API[^(;]*(' \
    | sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\($/\1/' | sort -u
}

check_exports() {
  local flavour=$1 lib=$2 syms bad missing=()
  syms=$(nm -D --defined-only "$lib")
  # Allowed: shmreg_*@@SHMREG_1.N, and the version nodes' own absolute symbols.
  bad=$(awk '!(($2 == "A" && $3 ~ /^SHMREG_1\.[0-9]+$/) || $3 ~ /^shmreg_[a-z0-9_]+@@SHMREG_1\.[0-9]+$/) {print "  " $3}' <<<"$syms")
  [ -z "$bad" ] || fail "$flavour: libshmreg.so exports what is not a versioned shmreg_ function (src/libshmreg.map):"$'\n'"$bad"
  for f in $(header_functions); do
    grep -qE " $f@@SHMREG_1\.[0-9]+\$" <<<"$syms" || missing+=("$f")
  done
  [ ${#missing[@]} -eq 0 ] || fail "$flavour: declared in a public header (include/shmreg/*.h) but not exported (add to src/libshmreg.map): ${missing[*]}"
  echo "15-abi: $flavour: $(grep -c '@@SHMREG_' <<<"$syms") functions exported, all shmreg_*@@SHMREG_1.x"
}

check_abi() {
  local flavour=$1 lib=$2 dir=$3 rc=0
  bash scripts/abi-baseline.sh --record "$lib" "$dir/libshmreg.abi"
  if grep -nE "$PWD|$HOME/|/tmp/|/home/" "$dir/libshmreg.abi" "$baseline" | head -5 | grep .; then
    fail "$flavour: the recorded ABI or the baseline names a path of this machine (above)"
  fi
  abidiff "$baseline" "$dir/libshmreg.abi" >"$dir/abidiff.txt" 2>&1 || rc=$?
  # abidiff sets bit 8 only for what it knows breaks every caller (a removed
  # symbol); a changed signature or a struct that grew is bit 4 alone. Within
  # SOVERSION 1 only additions are allowed, so any removed or changed function
  # or variable fails too. Changes abidiff counts as harmless (an enumerator
  # added, a typedef renamed) are filtered out of those counts already.
  if (( rc & 8 )) || grep -qE 'changes summary: .*\b[1-9][0-9]* (Removed|Changed)' "$dir/abidiff.txt"; then
    cat "$dir/abidiff.txt"
    fail "$flavour: an INCOMPATIBLE ABI change against $baseline (abidiff exit $rc, report above): a function or variable removed or changed. A 1.x release must not break its users: restore the old declaration and add a new function instead (docs/abi.md)"
  elif (( rc & 4 )); then
    cat "$dir/abidiff.txt"
    echo "15-abi: $flavour: compatible ABI change against $baseline (abidiff exit $rc, report above): passes; re-record the baseline in the same change (bash scripts/abi-baseline.sh) and give new functions a new version node (docs/abi.md)"
  elif (( rc != 0 )); then
    cat "$dir/abidiff.txt"
    fail "$flavour: abidiff could not compare (exit $rc)"
  else
    echo "15-abi: $flavour: no ABI change against $baseline that abidiff reports (harmless ones, such as an added enumerator, it leaves out)"
  fi
}

# A supplement beside shmreg.h that shmreg.h does not include would be
# missing from every program that includes only shmreg.h.
for h in include/shmreg/*.h; do
  name=${h#include/}
  [ "$name" = shmreg/shmreg.h ] || grep -qx "#include <$name>" include/shmreg/shmreg.h \
    || fail "include/shmreg/shmreg.h does not include <$name>, a public header beside it"
done

[ -f "$baseline" ] || { echo "15-abi: no $baseline; record it with: bash scripts/abi-baseline.sh"; exit 1; }

databases=() unconfigured=() sources_checked=1
for flavour in cuda-on cuda-off; do
  dir=build/abi-$flavour
  hide=()
  if [ $flavour = cuda-on ]; then
    args=(-DSHMREG_WITH_CUDA=AUTO -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=OFF)
  else
    args=(-DSHMREG_WITH_CUDA=OFF -DSHMREG_WITH_UCX=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)
    # The server's optional libsystemd is left out here as CUDA is, so that
    # its stand-in (service/notify_none.c) is compiled by one build.
    hide=(-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DSERVER_WITH_SYSTEMD=OFF)
  fi
  echo "--- $flavour"
  rm -rf "$dir/prefix" "$dir/standalone" && mkdir -p "$dir/standalone"
  cmake -S . -B "$dir" -DSHMREG_WERROR=ON -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DBUILD_TESTING=ON -DSHMREG_BUILD_BENCH=ON \
    -DSHMREG_BUILD_EXAMPLES=ON "${args[@]}" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  if [ $flavour = cuda-on ] && ! grep -q 'CUDA backends ON' "$dir.configure.log"; then
    echo "15-abi: no CUDA toolkit here: only the build without CUDA is checked, and not the sources"
    sources_checked=0  # the CUDA-only sources would all look orphaned
    continue
  fi
  databases+=("$dir/compile_commands.json")
  cmake --build "$dir" --target shmreg shmreg_static -j "$JOBS" >"$dir.build.log" 2>&1 \
    || { cat "$dir.build.log"; exit 1; }
  lib=$(readlink -f "$dir/src/libshmreg.so")

  check_exports "$flavour" "$lib"
  check_abi "$flavour" "$lib" "$dir"

  # The projects of their own, against this build's installed package: only
  # configured, which is when CMake writes compile_commands.json.
  cmake --install "$dir" --prefix "$PWD/$dir/prefix" >/dev/null
  for p in $standalone; do
    out=$dir/standalone/${p//\//-}
    # SERVER_BUILD_BENCH: the server's benches (its transport floors) are
    # sources too; the other projects ignore the variable.
    cmake -S "$p" -B "$out" -DCMAKE_PREFIX_PATH="$PWD/$dir/prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
      -DSERVER_BUILD_BENCH=ON "${hide[@]}" >"$out.configure.log" 2>&1 || {
      cat "$out.configure.log"; fail "$flavour: $p does not configure against the installed package"
      unconfigured+=("$p/"); continue; }
    databases+=("$out/compile_commands.json")
  done
done

# Every source is compiled by some build.
if [ "$sources_checked" -eq 0 ]; then
  [ "$failed" -eq 0 ] || { echo "15-abi: $failed failed"; exit 1; }
  echo "15-abi: passed (the build without CUDA only)"
  exit 0
fi
compiled=$(python3 -c '
import json, os, sys
for db in sys.argv[1:]:
    for entry in json.load(open(db)):
        print(os.path.realpath(os.path.join(entry["directory"], entry["file"])))' "${databases[@]}" | sort -u)
orphans=0 sources=0
while IFS= read -r src; do
  for p in "${unconfigured[@]}"; do
    [[ $src == "$p"* ]] && continue 2  # reported above as a project that does not configure
  done
  sources=$((sources + 1))
  if ! grep -qxF "$(readlink -f "$src")" <<<"$compiled"; then
    fail "$src is compiled by no build (the top-level project with CUDA on or off, or the projects $(echo $standalone | sed 's/ /, /g')): add it to a target's sources, or delete it"
    orphans=$((orphans + 1))
  fi
done < <(find src tests bench examples server -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.cc' \) | sort)
echo "15-abi: sources: $((sources - orphans)) of $sources compiled by a build (${#databases[@]} compile_commands.json)"

[ "$failed" -eq 0 ] || { echo "15-abi: $failed failed"; exit 1; }
echo "15-abi: passed"
