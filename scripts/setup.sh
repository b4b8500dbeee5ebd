#!/usr/bin/env bash
# README command 1: install what is missing, build the release preset, run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
cmake --preset release >/dev/null
cmake --build --preset release

# The main job: train the tiny GPT on 4 in-process ranks (data x fsdp, ZeRO 2); the loss falls
# from about 5.5 to below 0.3 in about 15 seconds here.
build/release/bin/shardwise train --model tiny --mesh data=2,fsdp=2 --zero 2 --steps 150 \
  --batch 16 --lr 3e-3 --eval-every 50
