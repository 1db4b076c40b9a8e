#!/usr/bin/env bash
# UI tests: a real JupyterLab (local provider + loopback sshd host) in Debian's Chromium.
# Needs: chromium (apt), Node 20, the package's Python dependencies and the built
# labextension (tests/run.sh installs all of them). Arguments go to `playwright test`.
set -euo pipefail
cd "$(dirname "$0")"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
# The Python the tests run on: tests/run.sh's virtual environment unless one is active.
if [ -z "${VIRTUAL_ENV:-}" ] && [ -x ../.venv-test/bin/python ]; then
  # shellcheck disable=SC1091
  . ../.venv-test/bin/activate
fi
export JRHW_UI_PORT="${JRHW_UI_PORT:-8888}"
if [ ! -d node_modules/@jupyterlab/galata ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

# The sharing tests' teammate key pair (serve.py generates it; the tests read it).
teammate=$(mktemp -d /tmp/jrhw-ui-teammate-XXXXXX)
export JRHW_UI_TEAMMATE_KEY="$teammate/id_ed25519"
# The untrusted host's address, fingerprint and known_hosts file (errors.spec.ts).
export JRHW_UI_NEWBOX="$teammate/newbox.json"

# The SLURM cluster of ../shared/slurm (beside the checkout), for slurm.spec.ts: it
# needs root; where it cannot start, that test is skipped and says why.
slurm_dev="$(cd .. && pwd)/../shared/slurm"
if [ -x "$slurm_dev/up.sh" ] && [ "$(id -u)" = 0 ]; then
  if "$slurm_dev/up.sh" > "$teammate/slurm-up.log" 2>&1; then
    export JRHW_UI_SLURM_CONF="${SLURM_DEV_DIR:-/tmp/slurm-dev}/etc/slurm.conf"
  else
    echo "ui-tests: the SLURM cluster did not start; slurm.spec.ts is skipped:" >&2
    tail -5 "$teammate/slurm-up.log" >&2
  fi
fi

python3 serve.py > server.log 2>&1 &
server=$!
stop_server() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  rm -rf "$teammate"
}
trap stop_server EXIT

python3 - <<PY
import time, urllib.request
deadline = time.monotonic() + 120
while True:
    try:
        urllib.request.urlopen("http://127.0.0.1:${JRHW_UI_PORT}/lab", timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise SystemExit("JupyterLab did not start; see ui-tests/server.log")
        time.sleep(1)
PY
npx playwright test "$@"
