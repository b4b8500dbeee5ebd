#!/usr/bin/env bash
# README command 1: install what is missing, build the release preset, run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
cmake --preset release >/dev/null
cmake --build --preset release

# The main job: show how a 2 x 4 mesh shards an 8 x 16 array (the in-process default).
build/release/bin/shardwise layout --mesh data=2,model=4 --spec "P('data', 'model')" --shape 8,16
