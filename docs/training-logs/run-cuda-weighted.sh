#!/usr/bin/env bash
# Two continued runs side by side on one H200, GPU code sampled 4x per token (`--gpu-weight 4`):
#   v3c: dice-tiny v3 (16 layers, int8 weights dequantized) continued
#   v2c: dice-tiny v2 (8 layers, the shipped model) continued
# Both on the v3 pack, 18 minutes on the wall clock each (RUN_MINUTES=N for another length), sharing the GPU. The calls (each <= 10 min, the
# working tree <= 64 MiB with what it carries, <= 8 files back) and what each carries:
#   setup                 (carry .whl, .pack/pack-a.tar.xz; the shipped model left out of the tree) code, wheels, pack a
#   unpack ARCHIVE        (carry .pack/pack-b.tar.xz) the second half of the pack
#   launch v3c INIT [W]   (carry .v3: the v3 int8 folder) start v3c detached
#   launch v2c INIT [W]   (the shipped model in the tree) start v2c detached
#     W: the sampling weights; default: per dialect (WEIGHTS below) when the pack has train-files.json, else
#     `--gpu-weight 4`
#   wait SECONDS          follow both logs (keeps the machine held: it goes back when idle)
#   collect NAME OUT [N]  int8 weights + log of one run into OUT (8 files), after at most N x 10 s for its end
# Weights per dialect instead of `--gpu-weight 4` (which weights CUDA, HIP and hashcat's OpenCL alike): the pack
# needs its per-file index, train-files.json next to meta.json (new packs write it; the v3 pack's was rebuilt with
# python -m dice_lsp.training.corpus index --pack /work/data19/pack --corpus /work/data19/corpus2 and kept as
# .pack/train-files.json.xz, 1.2 MB: carry it with pack-a; setup unpacks it), and launch replaces `--gpu-weight 4` with e.g. `--weights cuda=4,hip=2,opencl=0.5,source:hashcat=0`
# (per token, default 1; the log's first lines give the expected share of windows per dialect; docs/MODEL.md).
set -euo pipefail
ROOT=/root/cw
RUN_MINUTES=${RUN_MINUTES:-18}   # the run's length on the wall clock (its schedule ends there)
WEIGHTS="--weights cuda=4,hip=2,opencl=0.5,source:hashcat=0"
export PYTHONPATH=$ROOT/code:$ROOT/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
case "$1" in
setup)
    mkdir -p $ROOT/pack $ROOT/runs $ROOT/logs
    rm -rf $ROOT/code && mkdir -p $ROOT/code && cp -r dice_lsp $ROOT/code/
    mkdir -p $ROOT/tok && cp dice_lsp/models/dice-tiny/tokenizer*.json $ROOT/tok/
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $ROOT/site .whl/*.whl
    tar -xJf .pack/pack-a.tar.xz -C $ROOT/pack
    if [ -f .pack/train-files.json.xz ]; then xz -dc .pack/train-files.json.xz > $ROOT/pack/train-files.json; fi
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
    du -sh $ROOT/pack ;;
unpack)
    tar -xJf "$2" -C $ROOT/pack && ls $ROOT/pack | wc -l && du -sh $ROOT/pack ;;
launch)
    name=$2; init=$ROOT/init-$name
    rm -rf "$init" && cp -r "$3" "$init"
    layers=$(python3 -c "import json; print(json.load(open('$init/config.json'))['num_hidden_layers'])")
    lr=$([ "$name" = v3c ] && echo 3e-4 || echo 5e-4)
    weighting=${4:-$([ -f $ROOT/pack/train-files.json ] && echo "$WEIGHTS" || echo "--gpu-weight 4")}
    cd $ROOT
    setsid nohup python3 -m dice_lsp.training.train --data pack --tokenizer tok --out runs/$name --init "$init" \
        --layers "$layers" $weighting --run-minutes "$RUN_MINUTES" --minutes "$((RUN_MINUTES + 1))" --batch 128 --lr "$lr" --warmup 0.03 \
        --curriculum-from 0.5 --workers 7 --compile --log-every 100 > logs/$name.log 2>&1 < /dev/null &
    sleep 45; tail -3 logs/$name.log ;;
wait)
    end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        sleep 60; for f in $ROOT/logs/*.log; do echo "$f: $(tail -1 "$f" | cut -c1-220)"; done
        [ "$(grep -l "trained to step" $ROOT/logs/*.log | wc -l)" -ge "$(ls $ROOT/logs/*.log | wc -l)" ] && break
    done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader ;;
collect)
    # Never wait unbounded: at most ${4:-20} x 10 s for the end, then take the newest checkpoint on disk.
    name=$2
    for _ in $(seq 1 "${4:-20}"); do
        grep -q "trained to step\|Traceback" $ROOT/logs/$name.log && break
        sleep 10
    done
    tail -2 $ROOT/logs/$name.log
    timeout 120 python3 -m dice_lsp.training.export $ROOT/runs/$name $ROOT/int8-$name
    mkdir -p "$3"
    cp $ROOT/int8-$name/model-*.safetensors $ROOT/int8-$name/model.safetensors.index.json \
       $ROOT/int8-$name/config.json $ROOT/runs/$name/train_log.json "$3"/
    xz -9 -c $ROOT/logs/$name.log > "$3"/$name.log.xz
    ls -la "$3" ;;
esac
