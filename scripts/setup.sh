#!/usr/bin/env bash
# One-time (and idempotent) set-up of everything codegrep needs on this machine:
# system packages, npm dependencies, the pinned Temporal CLI and SeaweedFS, and the Python venv for the trainer and the
# BM25 reference. Each step is skipped quickly when already done.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "codegrep setup: $*" >&2; }

# Node 20.19+ (vitest/vite need it).
node_version="$(node --version 2>/dev/null || echo none)"
case "$node_version" in
  v2[0-9].*|v[3-9][0-9].*) ;;
  *) say "Node.js >= 20.19 is required (found $node_version)"; exit 1 ;;
esac

# System packages: git and ripgrep (the grep tool's engine). Installed with apt when missing and we are root.
missing=()
command -v git >/dev/null || missing+=(git)
command -v rg >/dev/null || missing+=(ripgrep)
# prlimit caps every sandboxed program's memory and CPU (lib/sandbox/subprocess.ts; sh's ulimit otherwise).
command -v prlimit >/dev/null || missing+=(util-linux)
# bubblewrap: every agent tool process runs in a namespace that holds only its worktree (lib/sandbox/namespace.ts).
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v python3 >/dev/null || missing+=(python3 python3-venv)
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    say "installing ${missing[*]} with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    say "please install: ${missing[*]} (ripgrep is optional: GNU grep is the fallback)"
    command -v git >/dev/null || exit 1
  fi
fi

# npm dependencies, from the lockfile; redone only when package-lock.json changes.
stamp="node_modules/.codegrep-lock-hash"
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_hash" ]]; then
  say "npm ci"
  npm ci --no-audit --no-fund >&2
  echo "$lock_hash" > "$stamp"
fi

# The pinned Temporal CLI (built with Go on first use).
bash scripts/ensure-temporal.sh >/dev/null

# The pinned SeaweedFS (`weed`), the S3-compatible server the s3:// artifact-store tests run against. Built with
# Go on first use (about 16 minutes on 2 busy cores), so only where the tests need it: `npm test` (scripts/test.sh)
# and `.ci/run` set CODEGREP_WITH_SEAWEEDFS=1; the demo and a worker never wait for it.
if [[ "${CODEGREP_WITH_SEAWEEDFS:-}" == 1 ]]; then bash scripts/ensure-seaweedfs.sh >/dev/null; fi

# Python venv (trainer, BM25 reference).
if [[ -f scripts/setup-python.sh ]]; then bash scripts/setup-python.sh; fi
say "ready"
