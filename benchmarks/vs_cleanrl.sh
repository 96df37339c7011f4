#!/usr/bin/env bash
# Whole-process time of CleanRL's dqn_atari.py against dqn-train on the CPU.
#
# Both programs play the same number of Pong agent steps (4 frames each), learn from step
# 1,000 with a minibatch of 32 every 4 steps, keep a replay memory of 100,000, run fp32 on
# 2 torch threads, and are timed from process start to exit. The programs run one after
# the other, round after round, and the table gives each wall time (with user + system CPU
# seconds) and CleanRL's time divided by each dqn-train's: above 1, dqn-train is faster.
#
# Exploration is matched: CleanRL anneals epsilon from 1 to 0.01 over the first 10% of its
# steps (1,100 of 11,000), so dqn-train runs with --ep-end 0.01 --ep-endt 100 (epsilon 0.01
# from step 1,100); with its own defaults it would hardly ever run the network to act.
# Otherwise each program keeps its defaults: CleanRL uses Adam (lr 1e-4), a target network
# copy every 1,000 steps, TensorBoard scalars and an SPS line every 100 steps; dqn-train
# uses DQN 3.0's RMSProp, a target copy every 10,000 steps, no evaluation (--eval-freq past
# the end) and writes its history and checkpoint once, at the end.
#
# Setting up CleanRL (once, anywhere outside this repository):
#   git clone <CleanRL's repository: vwxyzjn/cleanrl on GitHub> CLEANRL
#   python3 -m venv VENV
#   VENV/bin/pip install torch==2.13.0+cpu numpy==2.4.6 gymnasium==0.29.1 ale-py==0.12.1 \
#       tyro tensorboard opencv-python-headless
# (torch's CPU build, the same as this project's; gymnasium 0.29.1 is the version CleanRL
# pins and whose API dqn_atari.py uses.) dqn_atari.py runs unmodified: ale-py 0.12 registers
# the Atari ids only next to gymnasium >= 1.1, so the launcher below registers them itself,
# and sets torch's threads.
#
# Usage:
#   benchmarks/vs_cleanrl.sh --cleanrl CLEANRL --cleanrl-python VENV/bin/python \
#       [--rounds 3] [--steps 11000] [--pause PID] [LABEL=SOURCE_TREE ...]
# CLEANRL is the folder holding dqn_atari.py and cleanrl_utils/ (or $CLEANRL_DIR);
# --cleanrl-python the interpreter of its environment (or $CLEANRL_PYTHON). Each
# LABEL=SOURCE_TREE is a checkout of this project, run with $PYTHON (default python3) from
# that tree; default: this repository, labelled dqn-train. --pause PID stops that process
# (for example a training run sharing the cores) during the rounds and continues it after.
set -euo pipefail

rounds=3 steps=11000 learn_start=1000 threads=2 pause=""
cleanrl=${CLEANRL_DIR:-} cleanrl_python=${CLEANRL_PYTHON:-}
trees=()
while (($#)); do
    case $1 in
        --cleanrl) cleanrl=$2; shift 2 ;;
        --cleanrl-python) cleanrl_python=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --pause) pause=$2; shift 2 ;;
        *=*) trees+=("$1"); shift ;;
        *) echo "vs_cleanrl.sh: unknown argument '$1' (see the header of this script)" >&2; exit 2 ;;
    esac
done
[[ -f $cleanrl/dqn_atari.py && -d $cleanrl/cleanrl_utils ]] \
    || { echo "vs_cleanrl.sh: --cleanrl must name the folder holding dqn_atari.py and cleanrl_utils/" >&2; exit 2; }
[[ -x $cleanrl_python ]] || { echo "vs_cleanrl.sh: --cleanrl-python must name an interpreter" >&2; exit 2; }
((${#trees[@]})) || trees=("dqn-train=$(cd "$(dirname "$0")/.." && pwd)")
python=${PYTHON:-python3}

work=$(mktemp -d)
cleanup() {
    [[ -z $pause ]] || kill -CONT "$pause" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [[ -n $pause ]]; then kill -STOP "$pause"; fi

cleanrl_launcher='
import runpy, sys
import gymnasium as gym
import torch
if "PongNoFrameskip-v4" not in gym.registry:
    from ale_py.registration import register_v0_v4_envs
    register_v0_v4_envs()
torch.set_num_threads(int(sys.argv[1]))
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")'
train_launcher='import sys; from dqn_nature.commands import train; sys.exit(train())'

# timed LOG COMMAND...: run COMMAND in $work, output to LOG; print "wall user+sys"
timed() {
    local log=$1 t; shift
    TIMEFORMAT='%R %U %S'
    if ! t=$( { time (cd "$work" && "$@" >"$log" 2>&1) ; } 2>&1 ); then
        echo "vs_cleanrl.sh: '$*' failed; the end of its output:" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    awk '{ printf "%.1f %.1f\n", $1, $2 + $3 }' <<<"$t"
}

run_cleanrl() {
    OMP_NUM_THREADS=$threads PYTHONPATH=$cleanrl timed "$work/cleanrl_$1.log" \
        "$cleanrl_python" -c "$cleanrl_launcher" "$threads" "$cleanrl/dqn_atari.py" \
        --env-id PongNoFrameskip-v4 --total-timesteps "$steps" --learning-starts "$learn_start" \
        --train-frequency 4 --batch-size 32 --buffer-size 100000 --no-track --no-capture-video
}

run_tree() {  # run_tree TREE LOGNAME
    OMP_NUM_THREADS=$threads PYTHONPATH=$1 timed "$work/$2.log" \
        "$python" -c "$train_launcher" --game pong --steps "$steps" --learn-start "$learn_start" \
        --update-freq 4 --minibatch-size 32 --replay-memory 100000 --gpu -1 --threads "$threads" \
        --precision fp32 --ep-end 0.01 --ep-endt 100 --eval-freq $((10 * steps)) \
        --save-freq $((10 * steps)) --name "$work/$2"
}

versions='
import importlib.metadata as m, platform
names = ["torch", "numpy", "ale-py", "gymnasium", "opencv-python-headless"]
print("Python", platform.python_version(), *(f"{n} {m.version(n)}" for n in names if n in
      {d.metadata["Name"].lower() for d in m.distributions()}))'
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "CleanRL: $("$cleanrl_python" -c "$versions")"
echo "dqn-train: $("$python" -c "$versions")"
for tree in "${trees[@]}"; do
    label=${tree%%=*} path=${tree#*=}
    echo "$label: $(git -C "$path" describe --always --dirty 2>/dev/null || echo "$path")"
done
echo "$steps agent steps, learning from step $learn_start, $threads threads; wall s (user + system CPU s);"
echo "load: the 1-minute load average as the round starts (above the core count, the figures are noisy)"
echo

header="| round | load | CleanRL |" rule="|---|---|---|"
for tree in "${trees[@]}"; do header+=" ${tree%%=*} | CleanRL / ${tree%%=*} |"; rule+="---|---|"; done
echo "$header"
echo "$rule"
for ((r = 1; r <= rounds; r++)); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    out=$(run_cleanrl "$r")
    read -r base base_cpu <<<"$out"
    row="| $r | $load | $base ($base_cpu) |"
    for tree in "${trees[@]}"; do
        label=${tree%%=*}
        out=$(run_tree "${tree#*=}" "${label}_$r")
        read -r t t_cpu <<<"$out"
        row+=" $t ($t_cpu) | x$(awk -v a="$base" -v b="$t" 'BEGIN { printf "%.2f", a / b }') |"
    done
    echo "$row"
done
