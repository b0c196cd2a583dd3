#!/usr/bin/env bash
# Rejection-sampling fine-tuning of the shipped dice-tiny on one GPU machine (docs/MODEL.md, "Rejection-sampling
# fine-tuning"): the model fills one-line holes of TRAIN-split CUDA files, the fills that parse, resolve and
# match the removed line closely are kept, and the model is fine-tuned on them mixed half and half with the pack.
# The calls (each <= 10 min; the working tree <= 64 MiB with what it carries, so the model's weights and the
# pack travel in different calls; the machine must stay warm between them):
#   keep                  (the shipped model in the tree; carry .whl) copy it to /root/keep, install code + wheels
#   setup                 (the model's model.safetensors moved out of the tree; carry .whl,
#                          .pack/rft-cuda-capped.jsonl.xz, .pack/pack-a.tar.xz) the CUDA files and pack part a
#   collect MINUTES       start the collection detached (no hole started after MINUTES)
#   unpack ARCHIVE        (carry .pack/pack-b.tar.xz) the pack's second half
#   finetune MINUTES      wait for the collection to end, then start the fine-tune detached (MINUTES long)
#   wait SECONDS          follow the logs until the fine-tune ends (keeps the machine held)
#   bring OUT [N]         int8 weights, config, training log, kept fills' counts into OUT (<= 8 files), after at
#                         most N x 10 s for the end
# .pack/rft-cuda-capped.jsonl.xz: the CUDA-dialect train records of the corpus the v3 pack was made from
# (/work/data19/corpus2), at most 2 MB of text per source (3,618 files, 45 MB; 4.4 MB as xz), as a corpus
# folder's train.jsonl. Collect reads its TRAIN split only and skips CUDA-Infill and held-out files; at 2 holes
# per file it cuts 2,954 holes, so the run takes 6 per file. Dry run of every step here on the CPU (tiny sizes):
# collect 33 holes -> 8 kept (2 exact, 1.8 holes/s); finetune 18 steps at batch 4 -> export int8, 2 shards of
# 15.7 and 12.3 MB (under the 16 MiB a file may have coming back).
set -euo pipefail
ROOT=/root/rft
export PYTHONPATH=$ROOT/code:$ROOT/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
case "$1" in
keep)
    mkdir -p /root/keep && rm -rf /root/keep/dice-tiny && cp -r dice_lsp/models/dice-tiny /root/keep/
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $ROOT/site .whl/*.whl
    ls -la /root/keep/dice-tiny ;;
setup)
    mkdir -p $ROOT/pack $ROOT/corpus $ROOT/runs $ROOT/logs
    rm -rf $ROOT/code && mkdir -p $ROOT/code && cp -r dice_lsp bench $ROOT/code/  # bench: the suite collect skips
    cp /root/keep/dice-tiny/model.safetensors $ROOT/code/dice_lsp/models/dice-tiny/
    [ -d $ROOT/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $ROOT/site .whl/*.whl
    xz -dc .pack/rft-cuda-capped.jsonl.xz > $ROOT/corpus/train.jsonl
    tar -xJf .pack/pack-a.tar.xz -C $ROOT/pack
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
    du -sh $ROOT/pack $ROOT/corpus ;;
collect)
    cd $ROOT
    setsid nohup python3 -m dice_lsp.training.rft collect --corpus corpus --model /root/keep/dice-tiny \
        --out runs/fills.jsonl --holes 200000 --per-file 6 --candidates 8 --batch 32 --seed 0 --minutes "$2" \
        --json --quiet \
        > logs/collect.log 2>&1 < /dev/null &
    sleep 60; tail -c 400 logs/collect.log; echo; wc -l runs/fills.jsonl ;;
unpack)
    tar -xJf "$2" -C $ROOT/pack && ls $ROOT/pack | wc -l && du -sh $ROOT/pack ;;
finetune)
    cd $ROOT
    while pgrep -f "training.rft collect" > /dev/null; do sleep 5; done
    tail -c 300 logs/collect.log; echo; wc -l runs/fills.jsonl
    setsid nohup python3 -m dice_lsp.training.rft finetune --data pack --tokenizer /root/keep/dice-tiny \
        --init /root/keep/dice-tiny --rft runs/fills.jsonl --rft-share 0.5 --out runs/rft \
        --run-minutes "$2" --minutes "$(( $2 + 1 ))" --batch 128 --compile --log-every 100 \
        > logs/finetune.log 2>&1 < /dev/null &
    sleep 60; tail -3 logs/finetune.log ;;
wait)
    end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        sleep 30; echo "$(tail -1 $ROOT/logs/finetune.log | cut -c1-220)"
        grep -q "trained to step\|fine-tuned to step\|Traceback" $ROOT/logs/finetune.log && break
    done ;;
bring)
    for _ in $(seq 1 "${3:-20}"); do
        grep -q "trained to step\|fine-tuned to step\|Traceback" $ROOT/logs/finetune.log && break
        sleep 10
    done
    tail -2 $ROOT/logs/finetune.log
    timeout 120 python3 -m dice_lsp.training.export $ROOT/runs/rft $ROOT/int8-rft
    mkdir -p "$2"
    cp $ROOT/int8-rft/model-*.safetensors $ROOT/int8-rft/model.safetensors.index.json $ROOT/int8-rft/config.json \
       $ROOT/runs/rft/train_log.json "$2"/
    xz -9 -c $ROOT/logs/finetune.log > "$2"/finetune.log.xz
    tail -c 2000 $ROOT/logs/collect.log | xz -9 > "$2"/collect-tail.log.xz
    ls -la "$2" ;;
esac
