#!/usr/bin/env bash
# dice-tiny v3 on one H200, in the phases the GPU machine's calls allow (each call <= 10 min, ~60 MB in,
# 8 files out). The run itself is detached (setsid) and outlives the calls; everything lives under /root/v3.
#   run-v3.sh setup             copy the code and v2 there, install the carried wheels
#   run-v3.sh unpack ARCHIVE    add an xz archive of pack shards (the pack travels in parts)
#   run-v3.sh launch            start training: v2 grown to 16 layers, 20 minutes on the wall clock
#   run-v3.sh wait SECONDS      follow the log
#   run-v3.sh collect OUT [N]   int8 weights + log into OUT (<= 8 files), after at most N x 10 s for the end
# Call order that fits one session's 30 device minutes: setup; unpack a; unpack b + launch + wait 400;
# wait 530; collect. The run must end inside the collect call: launch in the first minutes of the lease.
set -euo pipefail
ROOT=/root/v3
export PYTHONPATH=$ROOT/code:$ROOT/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
case "$1" in
setup)
    mkdir -p $ROOT/pack $ROOT/runs $ROOT/logs
    rm -rf $ROOT/code && mkdir -p $ROOT/code && cp -r dice_lsp $ROOT/code/
    [ -f $ROOT/v2/model.safetensors ] || cp -r dice_lsp/models/dice-tiny $ROOT/v2
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $ROOT/site .whl/*.whl
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
    ls -la $ROOT/v2 ;;
unpack)
    tar -xJf "$2" -C $ROOT/pack && ls $ROOT/pack | head -50 && du -sh $ROOT/pack ;;
launch)
    cd $ROOT
    setsid nohup python3 -m dice_lsp.training.train --data pack --tokenizer v2 --out runs/v3 --init v2 --layers 16 \
        --run-minutes 20 --minutes 21 --batch 128 --lr 5e-4 --warmup 0.02 --curriculum-from 0.5 \
        --workers 12 --compile --log-every 100 > logs/v3.log 2>&1 < /dev/null &
    sleep 90; tail -5 logs/v3.log ;;
wait)
    end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        sleep 30; tail -1 $ROOT/logs/v3.log
        grep -q "trained to step" $ROOT/logs/v3.log && break
    done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader ;;
collect)
    # Never wait unbounded: at most ${3:-20} x 10 s for the end, then take the newest checkpoint on disk (the
    # run writes one at every validation), so what trained comes back before the machine goes back.
    for _ in $(seq 1 "${3:-20}"); do
        grep -q "trained to step\|Traceback" $ROOT/logs/v3.log && break
        sleep 10
    done
    tail -3 $ROOT/logs/v3.log
    timeout 120 python3 -m dice_lsp.training.export $ROOT/runs/v3 $ROOT/v3-int8
    mkdir -p "$2"
    cp $ROOT/v3-int8/model-*.safetensors $ROOT/v3-int8/model.safetensors.index.json $ROOT/v3-int8/config.json \
       $ROOT/v3-int8/train_log.json "$2"/
    xz -9 -c $ROOT/logs/v3.log > "$2"/v3.log.xz
    ls -la "$2" ;;
esac
