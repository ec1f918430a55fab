#!/usr/bin/env bash
# Prints the path of a Temporal CLI to use, building the pinned one if needed.
#
# Order: $CODEGREP_TEMPORAL_BIN, `temporal` on PATH, the project-local .tools/bin/temporal, else build the
# pinned CLI v1.5.1 from source with Go into .tools/bin (once; later runs reuse it). v1.5.1 is the newest
# release `go install` can build: later tags carry a `replace` directive that `go install pkg@version` refuses.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="$root/.tools/bin"
pinned="v1.5.1"

if [[ -n "${CODEGREP_TEMPORAL_BIN:-}" ]]; then
  [[ -x "$CODEGREP_TEMPORAL_BIN" ]] || { echo "CODEGREP_TEMPORAL_BIN=$CODEGREP_TEMPORAL_BIN is not an executable file" >&2; exit 1; }
  echo "$CODEGREP_TEMPORAL_BIN"; exit 0
fi
if command -v temporal >/dev/null 2>&1; then command -v temporal; exit 0; fi
if [[ -x "$bin_dir/temporal" ]]; then echo "$bin_dir/temporal"; exit 0; fi

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<MSG
codegrep: no Temporal CLI found and Go is not installed, so the pinned CLI ($pinned) cannot be built.
  Either install Go (>= 1.23; e.g. 'apt-get install golang' or https://go.dev/dl) and run this again,
  or put a Temporal CLI on PATH, or set CODEGREP_TEMPORAL_BIN=/path/to/temporal.
MSG
  exit 1
fi

mkdir -p "$bin_dir"
start=$(date +%s)
echo "codegrep: building Temporal CLI $pinned with Go into $bin_dir (first run only; takes a few minutes)..." >&2
try_install() { CGO_ENABLED=0 GOBIN="$bin_dir" GOFLAGS=-buildvcs=false go install "github.com/temporalio/cli/cmd/temporal@$1" >&2; }
# A throw-away module that requires the version builds it even when `go install pkg@v` refuses a replace line.
try_module() {
  local tmp; tmp="$(mktemp -d)"
  ( cd "$tmp" && go mod init codegrep-temporal-build >/dev/null 2>&1 \
      && go get "github.com/temporalio/cli@$1" >&2 \
      && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -o "$bin_dir/temporal" github.com/temporalio/cli/cmd/temporal >&2 )
  local rc=$?; rm -rf "$tmp"; return $rc
}
if try_install "$pinned" || try_module "$pinned" || try_install v1.5.0 || try_install v1.4.1; then
  echo "codegrep: built $("$bin_dir/temporal" --version 2>/dev/null | head -1) in $(( $(date +%s) - start ))s" >&2
  echo "$bin_dir/temporal"
else
  echo "codegrep: could not build the Temporal CLI with Go (see the messages above)." >&2
  exit 1
fi
