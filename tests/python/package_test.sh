#!/usr/bin/env bash
# The Python package in the environment scripts/install_python_env.sh makes (scripts/test.sh
# makes it before the tests run):
#   package_test.sh VENV install SOURCE   pip install SOURCE (python.install)
#   package_test.sh VENV pytest SOURCE    its pytest suite (python.pytest)
# Exits 77 (skipped) where the environment has not been made.
set -euo pipefail
venv=$1
step=$2
source=$3
if [ ! -x "$venv/bin/python" ]; then
  echo "skipped: no $venv (scripts/install_python_env.sh makes it)"
  # scripts/test.sh asks for every comparison to run: a missing environment is a failure there.
  [ -n "${SHARDWISE_REQUIRE_COMPARISONS:-}" ] && exit 1
  exit 77
fi
case "$step" in
  install)
    exec "$venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps \
      --disable-pip-version-check "$source"
    ;;
  pytest)
    cd "$source"
    exec "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
    ;;
  *)
    echo "unknown step '$step'; expected install or pytest" >&2
    exit 2
    ;;
esac
