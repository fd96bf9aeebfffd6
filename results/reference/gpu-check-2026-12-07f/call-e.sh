# Next call E (scripts/gpu-next/README.md): issue 40 (b), the one-GPU rehearsal predicted with the
# staged bench's points interpolated (--fit-interpolate) beside the alpha-beta line, out of
# sample (docs/predict.md "(b)"); the GPU predict stage (kappa auto) runs first in the same stage.
W=/tmp/resE; rm -rf $W; mkdir -p $W
nproc; cat build/gpu/COMMIT; date -u; nvidia-smi --query-gpu=name --format=csv,noheader
SKIP_BUILD=1 STAGES="predict" BUDGET_S=${E_BUDGET:-330} OUT=$W/p scripts/gpu-check.sh > $W/p.log 2>&1; echo "predict rc=$? at $SECONDS s"
grep -E '^- ' $W/p/table.md | cut -c1-700
head -c 5000 $W/p/predict-rehearsal.md
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
