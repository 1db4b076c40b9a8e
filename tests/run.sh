#!/usr/bin/env bash
# Install everything the tests need on a fresh Debian machine (as root), then run them.
# This is the README's test command; .ci/run calls it too.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    openssh-server openssh-client iproute2 procps chromium >/dev/null
fi

python3 -m pip install --quiet --disable-pip-version-check '.[test]'
# The CPU build of torch (the tensor and module transfer tests use it).
python3 -m pip install --quiet --disable-pip-version-check 'torch==2.13.0'
# Static checks: lint, and full type hints in the package.
python3 -m ruff check jupyter_remote_hw tests benchmarks ui-tests/serve.py
python3 -m mypy jupyter_remote_hw
python3 -m pytest "$@"
# The front end: unit tests (jest), then UI tests in a real JupyterLab in Debian's Chromium.
[ -d node_modules/jest ] || npm ci --no-audit --no-fund --loglevel=error
npm test --silent
bash ui-tests/run.sh
