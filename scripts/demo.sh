#!/usr/bin/env bash
# Install Seedance and run the bundled simulation on the real Alibaba GPU trace: the six FGD-paper
# placement policies beside the paper's numbers, Seedance's own `seedance` packer and the offline
# bound, seeds 42-51, each with its bill at 100% arrived (allocated, idle and total $/h); the HTML
# report and its JSON go to ./report/. Extra arguments go to `seedancectl simulate`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e .
exec .venv/bin/seedancectl simulate --policy random,dot-product,clustering,packing,best-fit,fgd,seedance \
    --bound --seeds 42-51 --report report "$@"
