# The docs' runnable examples, run as a reader would (scripts/run-doc-snippets.py):
# every fenced block of README.md and docs/*.md marked
# <!-- doc-test: GROUP LANG --> (a setup line in sh, a C program built with
# the installed library's pkg-config, a Python snippet with the installed
# package). The library comes from tier 50's install and the package from
# tier 65's venv when they are there; run alone, the tier makes its own.
source "$(dirname "$0")/lib.sh"
dir=build/doc-snippets
mkdir -p "$dir"
prefix=$PWD/build/consumer-prefix
if [ ! -f "$prefix/lib/pkgconfig/shmreg.pc" ]; then
  prefix=$PWD/$dir/prefix
  build_tier "$dir/lib" -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_TESTING=OFF \
    -DSHMREG_BUILD_BENCH=OFF -DSHMREG_BUILD_EXAMPLES=OFF >"$dir/build.log" 2>&1 \
    || { tail -n 40 "$dir/build.log"; exit 1; }
  cmake --install "$dir/lib" >/dev/null
fi
py=$PWD/build/python-ci/venv/bin/python
if ! "$py" -c 'import shmreg, numpy' 2>/dev/null; then
  [ -x "$dir/venv/bin/python" ] || python3 -m venv "$dir/venv"
  py=$PWD/$dir/venv/bin/python
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$py" -m pip install -q . 'numpy>=1.25' >"$dir/pip.log" 2>&1 \
    || { tail -n 40 "$dir/pip.log"; exit 1; }
fi
# From outside the checkout, so that `import shmreg` is the installed package.
root=$PWD
(cd "$dir" && PKG_CONFIG_PATH=$prefix/lib/pkgconfig PYTHON=$py \
  python3 "$root/scripts/run-doc-snippets.py" "$root/README.md" "$root"/docs/*.md)
