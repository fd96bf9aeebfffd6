"""The N-rank launches' spread per trial (std/mean of each launch's slowest-rank mean step),
from predict-cpu.tar.xz:  mkdir -p /tmp/p && tar xJf predict-cpu.tar.xz -C /tmp/p && python3 spread.py /tmp/p/predict-cpu"""
import glob, json, statistics as st, sys
root = sys.argv[1]
for n in (2, 4):
    per = {}
    for f in sorted(glob.glob(f"{root}/r{n}/*/r{n}-*/trials.jsonl")):
        for line in open(f):
            t = json.loads(line)
            for rp in t.get("repeats") or []:
                ms = [st.mean(s["step_ms"] for s in rk["steps"]) for rk in rp["ranks"] if rk.get("steps")]
                if ms:
                    per.setdefault(t["id"], []).append(max(ms))
    print(n, "ranks:", ", ".join(f"{k} {100 * st.stdev(v) / st.mean(v):.1f}% of {len(v)}" for k, v in per.items()))
