#!/usr/bin/env bash
# `npm run lint`: ESLint (typescript-eslint + the layering rules of ARCHITECTURE.md, eslint.config.js),
# Prettier in check mode (.prettierrc.json; `npm run format` rewrites), ruff on the Python (ruff.toml), and no
# product function over 80 lines (test/lint/long-functions.ts, TypeScript and the trainer's Python).
# Runs all four, reports each, exits 1 when any failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
status=0

echo "-- eslint"
npx eslint . || status=1

echo "-- prettier --check"
npx prettier --check --log-level warn . && echo "prettier: all files formatted" || status=1

echo "-- ruff check"
ruff="${CODEGREP_VENV:-$root/.venv}/bin/ruff"
[[ -x "$ruff" ]] || ruff="$(command -v ruff || true)"
if [[ -n "$ruff" ]]; then
  "$ruff" check . || status=1
else
  echo "ruff not found: run scripts/setup-python.sh (it installs ruff into .venv from trainer/requirements.txt)" >&2
  status=1
fi
echo "-- functions over 80 lines"
npx tsx test/lint/long-functions.ts || status=1
exit $status
