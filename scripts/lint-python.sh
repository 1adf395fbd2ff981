#!/usr/bin/env bash
# Python hygiene, as `npm run lint` is for TypeScript: `ruff format --check` and `ruff check` (120
# columns; config in workers/python/pyproject.toml) over the Python worker, the bench peers and the
# tests' Python helpers (test/evidence).
# Uses the venv scripts/test-python.sh makes (ruff pinned there as the package's `lint` extra).
# Run by .ci/run; `bash scripts/lint-python.sh --fix` formats and applies the safe fixes instead.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=workers/python/.venv
if [ ! -x "$venv/bin/python" ]; then
  echo "lint-python: no venv at $venv (make it with: bash scripts/test-python.sh)" >&2
  exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'ruff==0.17.6' || exit 1
config=(--config workers/python/pyproject.toml)
paths=(workers/python bench/peers test/evidence)
if [ "${1:-}" = "--fix" ]; then
  "$venv/bin/ruff" format "${config[@]}" "${paths[@]}" && "$venv/bin/ruff" check --fix "${config[@]}" "${paths[@]}"
  exit $?
fi
"$venv/bin/ruff" format --check "${config[@]}" "${paths[@]}"; format=$?
"$venv/bin/ruff" check "${config[@]}" "${paths[@]}"; check=$?
echo "lint-python: ruff format $([ $format -eq 0 ] && echo ok || echo FAILED), ruff check $([ $check -eq 0 ] && echo ok || echo FAILED)" >&2
[ $format -eq 0 ] && [ $check -eq 0 ]
