import json,sys,os
src,dst=sys.argv[1],sys.argv[2]
os.makedirs(dst,exist_ok=True)
def rnd(o):
    if isinstance(o,float): return float('%.5g'%o)
    if isinstance(o,dict): return {k:rnd(v) for k,v in o.items()}
    if isinstance(o,list): return [rnd(v) for v in o]
    return o
out=[]
for l in open(os.path.join(src,'trials.jsonl')):
    d=json.loads(l)
    for rep in d.get('repeats') or []:
        for r in rep.get('ranks') or []:
            r.pop('timeline',None)
            if r.get('info'): r['info'].pop('init_phases',None)
            for s in r.get('steps') or []:
                for k in list(s):
                    if (s[k] in (0,False) and k not in ('step',)) or k in ('samples_per_s','tokens_per_s','grad_norm'): s.pop(k)
    out.append(json.dumps(rnd(d),separators=(',',':')))
open(os.path.join(dst,'trials.jsonl'),'w').write('\n'.join(out)+'\n')
m=json.load(open(os.path.join(src,'manifest.json')))
json.dump(m,open(os.path.join(dst,'manifest.json'),'w'),indent=2)
