#!/usr/bin/env bash
# Install Seedance and run the bundled simulation on the real Alibaba GPU trace: the six FGD-paper
# placement policies, seeds 42-51, printed beside the paper's numbers; the HTML report and its
# JSON go to ./report/. Extra arguments go to `seedancectl simulate`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e .
exec .venv/bin/seedancectl simulate --seeds 42-51 --report report "$@"
