#!/usr/bin/env bash
# Install everything the tests need on a fresh Debian machine (as root), then run them.
# This is the README's test command; .ci/run calls it too.
#
# The Python side runs in a virtual environment made from Debian's own /usr/bin/python3
# (never whichever python3 is first on PATH), with the newest releases the package's
# declared ranges allow, as a user installing today would get them.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
long_tests=""
finish() {
  # A run that stops early takes the long tests (below) with it.
  [ -z "$long_tests" ] || kill "$long_tests" 2>/dev/null || true
  echo "tests/run.sh: $((SECONDS - started)) s wall time"
}
trap finish EXIT
# Where the time goes, one line per phase (docs/development.md records them).
phase() { echo "tests/run.sh: $1 done at $((SECONDS - started)) s"; }
venv=${JRHW_TEST_VENV:-$(pwd)/.venv-test}
python=${JRHW_PYTHON:-/usr/bin/python3}

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    openssh-server openssh-client iproute2 procps chromium python3-venv >/dev/null
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# Everything below (pytest, the UI tests' JupyterLab, the test hosts' kernels) uses it.
# shellcheck disable=SC1091
. "$venv/bin/activate"
echo "tests run on $(python --version) from $(readlink -f "$python") in $venv"
pip=(python -m pip --quiet --disable-pip-version-check)
"${pip[@]}" install --upgrade pip
"${pip[@]}" install --upgrade --upgrade-strategy eager '.[test]'
# The CPU build of torch (the tensor and module transfer tests use it).
"${pip[@]}" install 'torch==2.13.0'
python -m pip list --disable-pip-version-check 2>/dev/null | grep -E -i \
  '^(asyncssh|ipykernel|ipython|ipywidgets|jupyter_client|jupyter_server|jupyterlab|pyzmq|tornado) ' \
  | tr -s ' ' | paste -sd ',' | sed 's/^/versions: /'
phase "installing"
# Static checks: lint, formatting, and full type hints in the package (as the pre-commit
# hooks run them).
bash tests/lint.sh ruff format mypy
phase "static checks"
# Parallel workers (JRHW_TEST_WORKERS, 2 by default): most tests wait on kernels, hosts
# and clusters rather than compute. Tests that share one resource share a group and run
# on one worker (SERIAL_GROUPS in tests/conftest.py: the SLURM tests, one cluster).
python -m pytest -n "${JRHW_TEST_WORKERS:-2}" --dist load --durations=20 -m "not long" "$@"
phase "pytest"
# The tests marked long wait for minutes, mostly idle (a link cut for five minutes): they
# run beside the front end's checks instead of holding a worker, and count the same.
long_log=$(mktemp /tmp/jrhw-long-tests-XXXXXX.log)
python -m pytest -m long -p no:cacheprovider "$@" > "$long_log" 2>&1 &
long_tests=$!
# The front end: lint and formatting, unit tests (jest), then UI tests in a real
# JupyterLab in Debian's Chromium.
[ -d node_modules/eslint ] || npm ci --no-audit --no-fund --loglevel=error
bash tests/lint.sh eslint prettier
phase "front-end lint"
npm test --silent
phase "jest"
bash ui-tests/run.sh
phase "UI tests"
status=0
wait "$long_tests" || status=$?
long_tests=""
tail -n 40 "$long_log"
rm -f "$long_log"
# 5: no test selected (arguments that name none of the long tests).
[ "$status" = 0 ] || [ "$status" = 5 ] || exit "$status"
phase "long tests"
