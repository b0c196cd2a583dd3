#!/usr/bin/env bash
# The diffusion-vs-autoregressive comparison at equal size, data, tokenizer, steps and regularisation (issue 19's
# fair baseline; docs/MODEL.md "Diffusion and autoregressive twins"): dice-tiny's shape trained from scratch twice on
# one GPU at the same time, once as the masked-diffusion model (the product's objective) and once as the
# fill-in-the-middle autoregressive model, both with residual dropout and weight decay, the same batch, schedule and
# number of steps. The step count is set from a speed probe so that both runs end in about RUN minutes.
# What travels (one call, working tree <= 64 MiB): the v3 pack's first 12 shards (.pack/pack-s.tar.xz, see
# run-rft.sh) and the wheels (.whl); docs/, tests/, client-vscode/ and model.safetensors are moved out of the tree
# for the calls (the tokenizer stays).
#   start RUN DROPOUT   (carry .whl .pack/pack-s.tar.xz) install, unpack, probe, start both runs detached
#   wait SECONDS        follow the logs (keeps the machine held: calls must follow each other)
#   bring OUT           both models as int8 (dice_lsp.training.export; 2 weight files each) + logs (tar.xz)
# Run on 2026-12-05 (H100): start 15 0.1, wait 540, wait 330, bring $OUT/twins (19 device minutes with the start; 8,183 steps each).
set -uo pipefail
ROOT=/root/twins
export PYTHONPATH=$ROOT/code:$ROOT/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
train() {  # OBJECTIVE STEPS MINUTES OUT
    python3 -m dice_lsp.training.train --data $ROOT/pack --tokenizer $ROOT/tok --out "$4" --objective "$1" \
        --steps "$2" --minutes "$3" --batch 128 --lr 1e-3 --warmup 0.03 --dropout "$DROPOUT" --weight-decay 0.1 \
        --workers 6 --compile --log-every 100
}
case "$1" in
start)
    DROPOUT=$3
    mkdir -p $ROOT/pack $ROOT/runs $ROOT/logs $ROOT/tok
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $ROOT/site .whl/*.whl
    rm -rf $ROOT/code && mkdir -p $ROOT/code && cp -r dice_lsp $ROOT/code/
    cp dice_lsp/models/dice-tiny/tokenizer.json dice_lsp/models/dice-tiny/tokenizer_config.json $ROOT/tok/
    tar -xJf .pack/pack-s.tar.xz -C $ROOT/pack
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
    # the probe: both objectives side by side for 300 steps (compiled, as the runs are), the slower one's tokens/s
    DROPOUT=$DROPOUT; export DROPOUT
    (train diffusion 100000 1.6 $ROOT/runs/probe-d > $ROOT/logs/probe-d.log 2>&1 &
     train ar 100000 1.6 $ROOT/runs/probe-a > $ROOT/logs/probe-a.log 2>&1 & wait)
    rate=$(python3 - "$ROOT/logs/probe-d.log" "$ROOT/logs/probe-a.log" <<'PY'
import json, re, sys
rates = []
for path in sys.argv[1:]:
    seen = [json.loads(m.group(1)) for m in re.finditer(r"dice_lsp.train: (\{.*\})", open(path).read())]
    steady = [s for s in seen[1:] if s["step"] % 100 == 0] or seen  # after compiling; whole intervals only
    rates.append(min(s["tokens_per_s"] for s in steady))
print(int(min(rates)))
PY
)
    steps=$(( rate * 60 * $2 / 65536 ))
    echo "probe: $rate tokens/s for the slower objective -> $steps steps each"
    echo "$steps" > $ROOT/logs/steps.txt
    cat > $ROOT/drive.sh <<DRIVE
cd $ROOT
$(declare -f train)
export DROPOUT=$DROPOUT ROOT=$ROOT
train diffusion $steps $(( $2 + 8 )) runs/diffusion > logs/diffusion.log 2>&1 &
train ar $steps $(( $2 + 8 )) runs/ar > logs/ar.log 2>&1 &
wait
echo done > logs/done
DRIVE
    setsid nohup bash $ROOT/drive.sh > $ROOT/logs/drive.log 2>&1 < /dev/null &
    sleep 45; tail -n 2 $ROOT/logs/diffusion.log $ROOT/logs/ar.log ;;
wait)
    end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        sleep 30
        for o in diffusion ar; do echo "$o: $(grep -o '"step": [0-9]*, "minutes": [0-9.]*' $ROOT/logs/$o.log | tail -1) $(grep -o '"val_nats": [0-9.]*' $ROOT/logs/$o.log | tail -1)"; done
        [ -f $ROOT/logs/done ] && break
        grep -q Traceback $ROOT/logs/diffusion.log $ROOT/logs/ar.log && break
    done ;;
bring)
    for _ in $(seq 1 30); do [ -f $ROOT/logs/done ] && break; sleep 10; done
    tail -n 2 $ROOT/logs/diffusion.log $ROOT/logs/ar.log
    mkdir -p "$2" $ROOT/small
    for o in diffusion ar; do
        python3 -m dice_lsp.training.export $ROOT/runs/$o $ROOT/int8-$o
        cp $ROOT/int8-$o/model-00001-of-00002.safetensors "$2/$o-1.safetensors"
        cp $ROOT/int8-$o/model-00002-of-00002.safetensors "$2/$o-2.safetensors"
        mkdir -p $ROOT/small/$o && cp $ROOT/int8-$o/*.json $ROOT/small/$o/
    done
    cp -r $ROOT/logs $ROOT/small/
    tar -C $ROOT/small -cJf "$2/small.tar.xz" .
    ls -la "$2" ;;
esac
