#!/usr/bin/env bash
# Install jupyter-remote-hw and JupyterLab into a virtual environment, from this clone.
#
#   bash install.sh            # makes .venv beside this file (or $JRHW_VENV)
#   . .venv/bin/activate       # later, in any shell: back into it
#
# On Debian the system Python refuses `pip install` (PEP 668), so everything goes
# into a virtual environment made from Debian's own /usr/bin/python3. The front end
# is built first with npm, in the open, so its progress shows; then pip installs the
# package with the built front end and does not need Node again. A wheel with the
# front end inside is left in dist/: installing it elsewhere needs no Node.
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
venv=${JRHW_VENV:-$here/.venv}
python=${JRHW_PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=$(command -v python3)
started=$SECONDS

step() { printf '\n[install %ss] %s\n' "$((SECONDS - started))" "$*"; }

if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  step "Installing Debian's python3-venv (needed to make a virtual environment)"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv
  else
    echo "Run as root, or install python3-venv first: sudo apt-get install python3-venv" >&2
    exit 1
  fi
fi

if [ ! -x "$venv/bin/python" ]; then
  step "Making the virtual environment $venv from $python ($("$python" --version 2>&1))"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

step "Installing JupyterLab (needed to build the front end)"
"${pip[@]}" install --progress-bar on 'jupyterlab>=4.1,<5'

if ! command -v npm >/dev/null; then
  echo "npm not found: install Node.js 20 (Debian: apt-get install nodejs npm)" >&2
  exit 1
fi
step "Installing the front end's npm packages (npm ci)"
npm ci --no-audit --no-fund --loglevel=error --progress=true
step "Building the front end (TypeScript, then the JupyterLab extension bundle)"
PATH="$venv/bin:$PATH" npm run build:prod

step "Building the wheel (front end included) into dist/"
rm -rf dist
"${pip[@]}" wheel --no-deps --wheel-dir dist .
step "Installing jupyter-remote-hw and its dependencies"
"${pip[@]}" install --progress-bar on dist/jupyter_remote_hw-*.whl

step "Checking the installation"
"$venv/bin/jupyter" server extension list 2>&1 | grep -E 'jupyter_remote_hw' || {
  echo "the server extension is not enabled" >&2; exit 1; }
"$venv/bin/jupyter" labextension list 2>&1 | grep -E 'jupyter-remote-hw' || {
  echo "the JupyterLab extension is not installed" >&2; exit 1; }
step "Done. Start JupyterLab with:  . $venv/bin/activate && jupyter lab"
