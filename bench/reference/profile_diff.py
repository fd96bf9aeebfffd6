"""Where the milliseconds moved between two kernel profiles of one model.

    python3 bench/reference/profile_diff.py A.json B.json [--labels a,b] [--rows 25]
    python3 bench/reference/profile_diff.py --tgz profiles.tgz NAME_A NAME_B ...

A and B are cs_bench.py --profile files (kernels.py's summary: step_ms,
kernel_ms, "categories" for every kernel family, "top" for the 40 largest
kernels a step); with --tgz they are the members of a gpu-check profiles.tgz
whose names end in NAME_A.json and NAME_B.json. Prints both step and kernel
times, then the difference a - b by kernel family and by kernel name, largest
first. A kernel outside one profile's top 40 counts 0 there (its family's
total still counts it). scripts/gpu-next/fprof.sh and bert-ln.sh use it.
"""
import argparse
import collections
import json
import sys
import tarfile

from kernels import _ms, load


def from_tgz(path, names):
    found = {}
    with tarfile.open(path) as t:
        for m in t.getmembers():
            for n in names:
                if m.name.endswith("/" + n + ".json") or m.name == n + ".json":
                    found[n] = json.load(t.extractfile(m))
    return [found.get(n) for n in names]


def diff(a, b, labels=("a", "b"), rows=25):
    """The report as a list of lines."""
    la, lb = labels
    out = [f"step_ms {la} {_ms(a.get('step_ms'))} {lb} {_ms(b.get('step_ms'))} "
           f"kernel_ms {_ms(a.get('kernel_ms'))} {_ms(b.get('kernel_ms'))}"]
    for key, field in (("categories", "category"), ("top", "name")):
        x, y = collections.Counter(), collections.Counter()
        for counter, p in ((x, a), (y, b)):  # names alike in their first 90 characters add up
            for k in p.get(key, []):
                counter[k[field][:90]] += k["ms"]
        out.append(f"by {field} ({la} - {lb}; a kernel outside one run's top 40 counts 0 there)")
        for n in sorted(set(x) | set(y), key=lambda n: (-abs(x[n] - y[n]), n))[:rows]:
            out.append(f"{x[n] - y[n]:+8.3f} ms  {la} {x[n]:7.3f}  {lb} {y[n]:7.3f}  {n}")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--tgz", help="read A and B as member names of this profiles.tgz")
    p.add_argument("--labels", default="a,b")
    p.add_argument("--rows", type=int, default=25)
    args = p.parse_args(argv)
    if "," not in args.labels:
        p.error("--labels %r: want two names, comma-separated (a,b)" % args.labels)
    labels = tuple(args.labels.split(",", 1))
    if args.tgz:
        a, b = from_tgz(args.tgz, [args.a, args.b])
    else:
        a, b = (load(f) for f in (args.a, args.b))
    if a is None or b is None:
        print("profiles missing:", [n for n, d in ((args.a, a), (args.b, b)) if d is None])
        return 1
    if "error" in a or "error" in b:
        print("a profile failed:", a.get("error") or b.get("error"))
        return 1
    print("\n".join(diff(a, b, labels, args.rows)))
    # Two profiles of one build differed by up to ~0.9 ms in a family the change
    # did not touch (docs/perf.md, "Twenty-fourth session"): a few steps each.
    print("(%s and %s: %s and %s profiled steps; differences within ~1 ms of one family may be the profiles' spread)"
          % (labels[0], labels[1], a.get("steps", "?"), b.get("steps", "?")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
