#!/usr/bin/env bash
# The main job on the bundled sample (13 instances of 4 small repositories): sets up what is missing, starts the
# embedded Temporal dev server and a worker, and runs data/sample/pipeline.yaml with progress bars and a summary;
# then the demo's training, on a task a tiny model can learn on this CPU (`codegrep learn-demo`: RFT, GRPO and the
# trained checkpoint against its untrained start on held-out instances).
# Needs network access (it fetches the 13 base commits, one commit deep) or `--mirrors DIR` (local bare mirrors).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
# data/sample-full/pipeline.yaml's training smoke run uses a tiny random model, made once (no download).
if [[ ! -f runs/tiny-model/config.json ]]; then
  mkdir -p runs
  .venv/bin/python -m trainer.random_model --out runs/tiny-model --shape tiny >/dev/null
fi
status=0
bin/codegrep run data/sample/pipeline.yaml "$@" || status=$?
if [[ $status -eq 3 ]]; then
  echo "codegrep demo: the pipeline finished, but some stages could not run here (the Stages table above says which and why)."
  status=0
fi
[[ $status -eq 0 ]] || exit $status
learn=0
bin/codegrep learn-demo || learn=$?
if [[ $learn -eq 3 ]]; then
  echo "codegrep demo: the learning demo finished, but some stages did not complete (the Stages table above says which and why)."
  learn=0
fi
exit $learn
