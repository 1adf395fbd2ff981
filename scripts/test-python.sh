#!/usr/bin/env bash
# The Python half of the test suite: makes ONE venv (workers/python/.venv, reused within a run),
# installs the Python worker package with its pinned test dependencies and the [pettingzoo] extra,
# and runs its pytest suite,
# teeing the log to reports/pytest.txt, which scripts/test-summary.mjs adds to the "N passed,
# N failed" line. npm test's cross-language tests (test/cross-lang/python-worker.ts) and the launcher
# (`workers.runtime: python`, when DETSIM_PYTHON is unset) then find this venv by themselves.
# pytest's exit 5 (no tests collected) is a failure: a suite that ran nothing never passes.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p reports
rm -f reports/pytest.txt
venv=workers/python/.venv
python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
  echo "test-python: $python not found: the Python tests did not run (install python3 >= 3.10)" >&2
  exit 1
fi
start=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" || exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check './workers/python[test,pettingzoo]' || exit 1
# The tests' temporary directories (tempfile, pytest's tmp_path) go under one root, removed after.
tmp_root=$(mktemp -d "${TMPDIR:-/tmp}/detsim-pytest-XXXXXX")
(cd workers/python && TMPDIR="$tmp_root" .venv/bin/python -m pytest -q -rfEsx -p no:cacheprovider tests) 2>&1 | tee reports/pytest.txt
status=${PIPESTATUS[0]}
rm -rf "$tmp_root"
if [ "$status" -eq 5 ]; then echo "test-python: pytest collected no tests (exit 5): that is a failure" >&2; status=1; fi
echo "test-python: venv + install + pytest took $(( $(date +%s) - start ))s (exit $status)" >&2
exit "$status"
