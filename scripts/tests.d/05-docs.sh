# Documentation that must not drift from the code: every error code of the
# header's X-macro list appears in docs/errors.md, and every version of the
# library the docs name is the header's (the one CMake and pyproject read).
# And the layers the docs describe (docs/design.md): no file under src/
# includes a header of a higher layer, or one without its folder; the
# self-test first shows that the check fails on each kind of planted include.
set -euo pipefail
cd "$(dirname "$0")/../.."
missing=0
codes=$(sed -n '/#define SHMREG_ERR_MAP/,/^$/p' include/shmreg/shmreg.h | grep -o 'X([A-Z_]*' | sed 's/X(/SHMREG_/')
for code in $codes; do
  grep -q "\`$code\`" docs/errors.md || { echo "docs/errors.md does not list $code"; missing=$((missing + 1)); }
done
n=$(echo "$codes" | wc -w)
echo "docs: $((n - missing)) passed, $missing failed"
[ "$missing" -eq 0 ] && [ "$n" -ge 10 ]
python3 scripts/check-doc-versions.py --self-test
python3 scripts/check-doc-versions.py README.md docs/*.md server/README.md
python3 scripts/check-layers.py --self-test
python3 scripts/check-layers.py
# The server's core and models return its neutral status, never an HTTP
# number (server/src/common/status.h); the self-test plants each kind first.
python3 scripts/check-server-status.py --self-test
python3 scripts/check-server-status.py
# The server's rooms: nothing includes a room above its own, no adapter
# another adapter, and JSON is http/'s alone.
python3 scripts/check-server-rooms.py --self-test
python3 scripts/check-server-rooms.py
# The docs, headers, sources, tests, scripts and examples speak of the
# product, not of how it was made (scripts/check-process-words.py lists the
# words); each occurrence is printed as FILE:LINE. The self-test plants such
# lines in a copy of the tree and expects each one reported.
python3 scripts/check-process-words.py --self-test
python3 scripts/check-process-words.py
# The server's core and models speak no protocol: models describe
# themselves as structs that each adapter renders (JSON is the HTTP
# adapter's), so no file under server/src/core or server/src/models includes
# a JSON header itself (json-c's or common/json_*.h). Each offender is
# printed as FILE:LINE.
if grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](json-c/|common/json_)' \
  server/src/core server/src/models; then
  echo "server: the includes above bring JSON into core/ or models/; it is the HTTP adapter's business"
  exit 1
fi
