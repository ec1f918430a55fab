#!/usr/bin/env bash
# Prints the path of a SeaweedFS `weed` binary (the S3-compatible server the s3:// artifact-store tests run
# against), building the pinned one if needed.
#
# Order: $CODEGREP_WEED_BIN, the project-local .tools/bin/weed, else build the pinned SeaweedFS with Go into
# .tools/bin (once; later runs reuse it). `weed` on PATH is NOT used: the tests rely on the pinned version's
# flags (-s3.config, `weed server -s3`), and a stray system binary may differ.
#
# The pinned pseudo-version's go.mod carries a `replace` line, which `go install pkg@version` refuses. So we
# build through a throw-away module that requires that version and copies the same replace lines, read from
# the downloaded module's own go.mod in the Go module cache.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="$root/.tools/bin"
module="github.com/seaweedfs/seaweedfs"
pinned="v0.0.0-20261109003541-7506e5f91cd6"

if [[ -n "${CODEGREP_WEED_BIN:-}" ]]; then
  [[ -x "$CODEGREP_WEED_BIN" ]] || { echo "CODEGREP_WEED_BIN=$CODEGREP_WEED_BIN is not an executable file" >&2; exit 1; }
  echo "$CODEGREP_WEED_BIN"; exit 0
fi
if [[ -x "$bin_dir/weed" ]]; then echo "$bin_dir/weed"; exit 0; fi

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<MSG
codegrep: no SeaweedFS 'weed' binary found and Go is not installed, so the pinned SeaweedFS ($pinned) cannot
  be built. Either install Go (>= 1.24; https://go.dev/dl) and run this again, or set
  CODEGREP_WEED_BIN=/path/to/weed.
MSG
  exit 1
fi

mkdir -p "$bin_dir"
start=$(date +%s)
echo "codegrep: building SeaweedFS $pinned with Go into $bin_dir (first run only; takes many minutes)..." >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(
  cd "$tmp"
  go mod init codegrep-seaweedfs-build >/dev/null 2>&1
  # Download the module itself first so its go.mod (and its replace lines) can be read from the cache.
  dir="$(go mod download -json "$module@$pinned" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -n "$dir" && -f "$dir/go.mod" ]] || { echo "codegrep: could not download $module@$pinned" >&2; exit 1; }
  # Copy both forms of replace: single-line `replace a => b` and the block `replace ( ... )`.
  awk '
    /^replace[[:space:]]*\(/ { inblock = 1; print; next }
    inblock { print; if ($0 ~ /^\)/) inblock = 0; next }
    /^replace[[:space:]]/ { print }
  ' "$dir/go.mod" >> go.mod
  # The upstream go.mod's go/toolchain lines apply too (newer language features).
  go_line="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$dir/go.mod" | head -1)"
  [[ -n "$go_line" ]] && go mod edit -go="$go_line"
  go mod edit -require="$module@$pinned"
  # A tiny main package that imports nothing is not enough: build the upstream command directly, letting Go
  # resolve the whole dependency graph from the pinned module's requirements.
  GOFLAGS=-mod=mod go get "$module/weed@$pinned" >&2
  CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" go build -o "$bin_dir/weed.tmp" "$module/weed" >&2
  mv "$bin_dir/weed.tmp" "$bin_dir/weed"
)
echo "codegrep: built SeaweedFS ($("$bin_dir/weed" version 2>/dev/null | head -1)) in $(( $(date +%s) - start ))s" >&2
echo "$bin_dir/weed"
