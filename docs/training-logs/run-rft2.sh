#!/usr/bin/env bash
# One-call RFT, second run (rft2): as run-rft.sh, with rft1's kept fills (.pack/rft1-fills.jsonl.xz) joining and
# mid-line holes collected too. int8 v2 + pack subset + capped CUDA corpus travel together; a detached driver runs
# 3 collectors (seeds 10-12) for COLLECT minutes, then the fine-tune for TUNE minutes. Verbs: start C T SHARE,
# wait SECONDS, bring OUT.
set -uo pipefail
ROOT=/root/rft
export PYTHONPATH=$ROOT/code:$ROOT/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
case "$1" in
start)
    mkdir -p $ROOT/pack $ROOT/corpus $ROOT/runs $ROOT/logs /root/keep
    rm -rf /root/keep/v2 && cp -r .pack/v2-int8 /root/keep/v2
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $ROOT/site .whl/*.whl
    rm -rf $ROOT/code && mkdir -p $ROOT/code && cp -r dice_lsp bench $ROOT/code/
    xz -dc .pack/rft-cuda-capped.jsonl.xz > $ROOT/corpus/train.jsonl
    tar -xJf .pack/pack-s.tar.xz -C $ROOT/pack
    xz -dc .pack/rft1-fills.jsonl.xz > $ROOT/runs/fills-rft1.jsonl
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
    cat > $ROOT/drive.sh <<DRIVE
cd $ROOT
for s in 10 11 12; do
  python3 -m dice_lsp.training.rft collect --corpus corpus --model /root/keep/v2 --out runs/fills-\$s.jsonl \
    --holes 200000 --per-file 6 --candidates 8 --batch 32 --seed \$s --kinds line midline --minutes $2 --json > logs/collect-\$s.log 2>&1 &
done
wait
cat runs/fills-*.jsonl > runs/fills.jsonl
wc -l runs/fills.jsonl > logs/kept.txt
python3 -m dice_lsp.training.rft finetune --data pack --tokenizer /root/keep/v2 --init /root/keep/v2 \
  --rft runs/fills.jsonl --rft-share $4 --out runs/rft --run-minutes $3 --minutes $(( $3 + 1 )) --batch 128 \
  --compile --log-every 100 > logs/finetune.log 2>&1
echo done > logs/done
DRIVE
    setsid nohup bash $ROOT/drive.sh > $ROOT/logs/drive.log 2>&1 < /dev/null &
    sleep 70; for s in 10 11 12; do tail -c 300 $ROOT/logs/collect-$s.log | tr '\r' '\n' | tail -1; echo; done
    wc -l $ROOT/runs/fills-*.jsonl; du -sh $ROOT/pack ;;
wait)
    end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        sleep 30
        if [ -f $ROOT/logs/finetune.log ]; then echo "ft: $(tail -1 $ROOT/logs/finetune.log | cut -c1-200)"
        else echo "collect: $(cat $ROOT/runs/fills-*.jsonl 2>/dev/null | wc -l) kept; $(tail -c 200 $ROOT/logs/collect-10.log | tr '\r' '\n' | tail -1 | cut -c1-150)"; fi
        [ -f $ROOT/logs/done ] && break
        grep -q Traceback $ROOT/logs/finetune.log 2>/dev/null && break
    done ;;
bring)
    for _ in $(seq 1 "${3:-20}"); do [ -f $ROOT/logs/done ] && break; sleep 10; done
    tail -3 $ROOT/logs/finetune.log; cat $ROOT/logs/kept.txt
    mkdir -p "$2"
    cp $ROOT/runs/rft/model-*.safetensors $ROOT/runs/rft/model.safetensors.index.json $ROOT/runs/rft/config.json \
       $ROOT/runs/rft/train_log.json "$2"/
    tar -C $ROOT -cJf "$2"/logs.tar.xz logs runs/fills.jsonl
    ls -la "$2" ;;
esac
