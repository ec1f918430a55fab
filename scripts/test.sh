#!/usr/bin/env bash
# Everything a user needs to trust the project: type check, lint (scripts/lint.sh: one counted check), unit tests,
# integration tests against a real Temporal dev server (started by vitest globalSetup), and the trainer's pytest suite.
# Ends with one line `N passed, N failed`.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
CODEGREP_WITH_SEAWEEDFS=1 bash scripts/setup.sh || exit 1
results="$(mktemp -d)"
status=0

echo "== type check"
npx tsc -p tsconfig.json || status=1

echo "== lint (eslint with the layering rules, prettier --check, ruff)"
if bash scripts/lint.sh; then echo ok > "$results/lint.status"; else echo failed > "$results/lint.status"; status=1; fi

echo "== unit tests"
npx vitest run --reporter=default --reporter=json --outputFile="$results/unit.json" || status=1

echo "== integration tests (real Temporal dev server)"
npx vitest run -c vitest.integration.config.ts --reporter=default --reporter=json --outputFile="$results/integration.json" || status=1

echo "== chaos (short: 1 trial per stage; the full table: npm run chaos)"
npx tsx bench/chaos.ts --trials 1 | tee "$results/chaos.jsonl" || status=1

if [[ -d trainer/tests ]]; then
  echo "== trainer tests (pytest)"
  .venv/bin/python -m pytest -q trainer/tests --junitxml="$results/pytest.xml" || status=1
fi

node -e '
const fs = require("fs"); const dir = process.argv[1];
let passed = 0, failed = 0, skipped = 0;
for (const f of ["unit.json", "integration.json"]) {
  const p = dir + "/" + f; if (!fs.existsSync(p)) { failed += 1; console.log(`(no ${f}: that suite did not run)`); continue; }
  const r = JSON.parse(fs.readFileSync(p, "utf8"));
  // A file that fails outside any test (an import error, a throwing beforeAll) counts as one failure.
  const fileErrors = (r.testResults || []).filter((t) => t.status === "failed" && !(t.assertionResults || []).some((a) => a.status === "failed")).length;
  passed += r.numPassedTests; failed += r.numFailedTests + fileErrors; skipped += r.numPendingTests + (r.numTodoTests || 0);
}
// Each chaos trial counts as one test: passed when the run completed with the reference artifacts, nothing lost or duplicated.
const c = dir + "/chaos.jsonl";
if (fs.existsSync(c)) {
  const trials = fs.readFileSync(c, "utf8").split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).filter((l) => l.kind === "trial");
  if (trials.length === 0) failed += 1;
  for (const t of trials) t.ok ? passed++ : failed++;
} else { failed += 1; console.log("(no chaos.jsonl: the chaos suite did not run)"); }
// The lint counts as one check.
const l = dir + "/lint.status";
if (fs.existsSync(l) && fs.readFileSync(l, "utf8").trim() === "ok") passed++; else { failed++; console.log("(lint failed: npm run lint)"); }
const x = dir + "/pytest.xml";
if (fs.existsSync(x)) {
  const head = fs.readFileSync(x, "utf8").match(/<testsuite [^>]*>/);
  const attr = (n) => Number((head && head[0].match(new RegExp(n + "=\"(\\d+)\"")) || [0, 0])[1]);
  const t = attr("tests"), f = attr("failures") + attr("errors"), s = attr("skipped");
  passed += t - f - s; failed += f; skipped += s;
}
console.log(`${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
' "$results"
exit $status
