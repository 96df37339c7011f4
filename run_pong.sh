#!/usr/bin/env bash
# The paper's run on Pong, as DQN 3.0's `./run_gpu pong`. Extra arguments pass through,
# e.g. ./run_pong.sh --gpu -1 --name runs/pong_seed2 --seed 2
set -euo pipefail
exec dqn-train --args run_gpu --game pong "$@"
