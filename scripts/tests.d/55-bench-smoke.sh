# shmreg-bench builds and runs end to end for a few milliseconds per
# measurement, so the benchmark never rots. It judges nothing about speed: a
# fast machine and a slow one pass alike. It fails on a build error, a
# registry call that fails inside the bench (it exits non-zero), or output
# that lacks a row it should have.
source "$(dirname "$0")/lib.sh"
mkdir -p build
dir=build/bench-smoke
build_tier "$dir" -DCMAKE_C_COMPILER=gcc -DSHMREG_WITH_CUDA=OFF -DSHMREG_BUILD_BENCH=ON \
  -DBUILD_TESTING=OFF -DSHMREG_BUILD_EXAMPLES=OFF
bench=$dir/bench/shmreg-bench

"$bench" --help >/dev/null
if "$bench" --threads 0 >/dev/null 2>&1; then
  echo "bench-smoke: --threads 0 was accepted"; exit 1
fi

"$bench" --threads 1,2 --regions 1,64,4096 --seconds 0.02 --warmup 0.01 --repeat 2 \
  --latency-seconds 0.05 --churn-mib 4 --csv "$dir/smoke.csv" | tee "$dir/smoke.txt"

# 3 region counts x 2 thread counts x 2 designs, then 2 latency rows.
rows() { grep -c "$1" "$dir/smoke.csv" || true; }
[ "$(rows '^throughput,')" -eq 12 ] || { echo "bench-smoke: expected 12 throughput rows"; exit 1; }
[ "$(rows '^churn_latency,')" -eq 2 ] || { echo "bench-smoke: expected 2 latency rows"; exit 1; }
grep -q '^| 4096 | 2 |' "$dir/smoke.txt" || { echo "bench-smoke: table row missing"; exit 1; }
echo "bench-smoke: ok (figures not judged)"

# The guarded-copy bench: one round, six rows (two directions x three sizes).
copy=$dir/bench/shmreg-bench-copy
"$copy" --rounds 1 --csv "$dir/copy.csv" | tee "$dir/copy.txt"
[ "$(grep -c '^guarded_copy,' "$dir/copy.csv")" -eq 6 ] || { echo "bench-smoke: expected 6 guarded-copy rows"; exit 1; }
echo "bench-smoke: guarded copies ok (figures not judged)"

# The server against its transport floors (server/bench/bench_request_cost.py):
# the server built as a user builds it, with the bare gRPC and HTTP servers
# beside it, a second per cell and four requests in flight. Fails when a
# request fails, a server does not start or stop cleanly, or a row or ratio
# is missing; the figures themselves are not judged.
build_server "$dir/server" -DSERVER_BUILD_BENCH=ON
venv=$dir/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q 'tritonclient[http,grpc]' numpy
"$venv/bin/python" server/bench/bench_request_cost.py --server "$dir/server/app/shmreg-server" \
  --seconds 1 --warmup 0.2 --concurrency 4 --csv "$dir/request_cost.csv" | tee "$dir/request_cost.txt"
for row in 'bare,grpc,' 'bare-callback,grpc,' 'server,grpc,' 'bare,http,' 'server,http,'; do
  grep -q "^$row" "$dir/request_cost.csv" || { echo "bench-smoke: request-cost row $row missing"; exit 1; }
done
[ "$(grep -c 'server / bare = \(.*: \(met\|missed\)\|not measured .*\)$' "$dir/request_cost.txt")" -eq 4 ] \
  || { echo "bench-smoke: expected 4 request-cost ratios"; exit 1; }
grep -q '^grpc floors, callback API / completion queue: ' "$dir/request_cost.txt" \
  || { echo "bench-smoke: the gRPC floors' comparison is missing"; exit 1; }
echo "bench-smoke: request cost against the floors ok (figures not judged)"
