#!/bin/bash
# A/B of the embedded-model team server at 8 editors: old scheduler files vs the working tree's, same machine
set -x
cp -r dice_lsp /tmp/new_dice_lsp
for v in old new old new; do
  if [ $v = old ]; then cp .gpu/old/continuous.py dice_lsp/engine/; cp .gpu/old/model_host.py dice_lsp/jobs/; cp .gpu/old/complete.py dice_lsp/; else cp -r /tmp/new_dice_lsp/* dice_lsp/; fi
  timeout 130 python bench/server_load.py --device cuda --clients 8 --seconds 6 > $OUT/ab_$v.log 2>&1
  echo "=== $v" >> $OUT/ab.txt; grep -A6 "^server " $OUT/ab_$v.log >> $OUT/ab.txt
  rm -f $OUT/ab_$v.log
done
