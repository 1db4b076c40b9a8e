#!/usr/bin/env bash
# The static checks, by name (all of them when none is named). tests/run.sh runs them
# in CI and the pre-commit hooks run them before a commit, so both check the same way.
#
#   ruff      lint the Python code
#   format    the Python code's formatting (ruff format; `python -m ruff format` rewrites)
#   mypy      full type hints in the package
#   eslint    lint the front end (needs node_modules: npm ci)
#   prettier  the front end's formatting
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- ruff format mypy eslint prettier
# The Python code that ruff lints and formats.
python_code=(jupyter_remote_hw tests benchmarks ui-tests/serve.py)
for check in "$@"; do
  case "$check" in
    ruff) python -m ruff check "${python_code[@]}" ;;
    format) python -m ruff format --check "${python_code[@]}" ;;
    mypy) python -m mypy jupyter_remote_hw ;;
    eslint) npx --no-install eslint labextension ;;
    prettier) npx --no-install prettier --check --log-level warn "labextension/**/*.{ts,css,json}" ;;
    *) echo "tests/lint.sh: no check named $check" >&2; exit 2 ;;
  esac
done
