#!/usr/bin/env bash
# Wheels for benchmarks/gpu_check.py on a GPU machine that has Python 3.12 and PyTorch
# but no Jupyter packages and no network: this checkout's own wheel and what it needs,
# leaving out what such a machine's image already holds (PyTorch's own dependencies,
# numpy, psutil, pyyaml...). They land in DIR (default: .whl in this checkout, which
# .git/info/exclude should ignore); on the GPU machine:
#
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site python3 benchmarks/gpu_check.py --json gpu.json
#
# Usage: bash benchmarks/gpu_wheels.sh [DIR] [PYTHON_VERSION]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/.whl}
version=${2:-3.12}
mkdir -p "$dir"
python3 -m pip download -q --only-binary=:all: --python-version "$version" \
  --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$dir" \
  'asyncssh>=2.14.2,<3' boto3 cloudpickle 'ipykernel>=6.29,<8' 'ipython>=8.20,<10' \
  'ipywidgets>=8.1,<9' 'jsonschema>=4.18,<5' 'jupyter_client>=8.6,<9' \
  'jupyter_server>=2.10,<3' 'nh3>=0.2.17,<1' 'pyzmq>=25,<28' tabulate 'tornado>=6.3,<7' \
  tenacity tqdm traitlets nbformat
# Already on the GPU image (two versions of one package stop the install there).
for name in anyio attrs idna jinja2 markupsafe packaging prometheus_client psutil \
  pygments python_dateutil pyyaml six typing_extensions tzdata urllib3 widgetsnbextension; do
  find "$dir" -maxdepth 1 -iname "${name}-*.whl" -delete
done
python3 -m pip wheel -q --no-deps -w "$dir" "$here"
du -sh "$dir"
