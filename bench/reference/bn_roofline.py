#!/usr/bin/env python3
"""bn_roofline.py: ResNet-50's batch-norm kernels (engine/native/src/cuda/bn_relu.cu)
against the memory roofline, from a kernel profile that gpu-check's profile stage wrote
(profiles.tgz: resnet50-engine-*.json, per kernel name: calls and ms a step).

  python3 bench/reference/bn_roofline.py PROFILE.json [--peak-tbs 4.8] [--sms 132]
        [--blocks-per-sm 4] [--batch N]

The profile records each kernel's total, not each launch's, so the bytes are
modelled per launch from ResNet-50's layer shapes (torchvision's v1.5, 224 pixels,
channels_last, 2-byte activations) and summed per kernel family (the template
arguments in the kernel's name: which tensors it reads and writes), then set
against the family's measured time. What each launch moves (E = N H W C elements):

  bn_fwd_stats          reads x (2E); writes blocks x 3 x C fp32 partials
  bn_fwd_finalize       reads the partials twice (n, mean; then n, mean, m2)
  bn_fwd_apply<R,U>     reads x (2E), residual (2E if R); writes y (2E), mask (E/8 if U)
  bn_bwd_reduce<U,D>    reads dy (2E), dy2 (2E: a block's output used twice), x (2E),
                        mask (E/8 if U); writes dres (2E if D), blocks x 2 x C partials
  bn_bwd_finalize       reads the partials once
  bn_bwd_apply<U>       reads g (2E), x (2E), mask (E/8 if U); writes dx (2E)

"blocks" is one wave of the reduction's resident blocks (--sms x --blocks-per-sm;
bn_relu.cu caps it at 4 a multiprocessor). Every byte is counted once, as if from
DRAM: tensors that fit the 50 MB L2 may be read faster, so a small launch's share
is an upper bound on its bytes, not a measurement. Prints a markdown table.
"""
import argparse
import json
import re
import sys


def bn_layers(n, image=224):
    """Each batch norm of ResNet-50 in forward order: (name, C, H, residual, relu, dy2)."""
    out = []
    h = image // 2  # the stem's stride-2 7x7
    out.append(("stem", 64, h, False, True, False))
    h //= 2  # max pool
    cin = 64
    blocks, planes = [3, 4, 6, 3], [64, 128, 256, 512]
    last = (len(blocks) - 1, blocks[-1] - 1)
    for st, (nb, w) in enumerate(zip(blocks, planes)):
        for b in range(nb):
            stride = 2 if st > 0 and b == 0 else 1
            ho = h // stride
            name = f"layer{st + 1}.{b}"
            if stride != 1 or cin != 4 * w:
                out.append((name + ".down", 4 * w, ho, False, False, False))
            out.append((name + ".bn1", w, h, False, True, False))
            out.append((name + ".bn2", w, ho, False, True, False))
            # The block's output feeds the next block twice (conv1 and the
            # residual): two gradients, added by the backward's reduction; the
            # last block's output feeds the head once.
            out.append((name + ".bn3", 4 * w, ho, True, True, (st, b) != last))
            cin, h = 4 * w, ho
    return [(nm, c, hh * hh * n, res, relu, dy2) for nm, c, hh, res, relu, dy2 in out]


def families(layers, blocks):
    """Per kernel family: launches and modelled bytes, keyed as the profile names them."""
    fam = {}

    def add(key, bytes_, elems):
        f = fam.setdefault(key, {"launches": 0, "bytes": 0.0, "elems": 0})
        f["launches"] += 1
        f["bytes"] += bytes_
        f["elems"] += elems

    for _, c, m, res, relu, dy2 in layers:
        e = m * c
        mask = e / 8 if relu else 0
        add("bn_fwd_stats_kernel", 2 * e + blocks * 3 * c * 4, e)
        add("bn_fwd_finalize_kernel", blocks * 5 * c * 4, e)
        add(f"bn_fwd_apply_kernel<{int(res)},{int(relu)}>", 2 * e + (2 * e if res else 0) + 2 * e + mask, e)
        dres = res or dy2
        add(f"bn_bwd_reduce_kernel<{int(relu)},{int(dres)}>",
            2 * e + (2 * e if dy2 else 0) + 2 * e + mask + (2 * e if dres else 0) + blocks * 2 * c * 4, e)
        add("bn_bwd_finalize_kernel", blocks * 2 * c * 4, e)
        # With a second gradient the apply reads the masked sum (no mask).
        urelu = relu and not dy2
        add(f"bn_bwd_apply_kernel<{int(urelu)}>", 2 * e + 2 * e + (e / 8 if urelu else 0) + 2 * e, e)
    return fam


def family_of(name):
    """The family key of a profiled kernel name (template flags as 0/1; FIXED dropped)."""
    m = re.search(r"(bn_\w+_kernel)(?:<([^>]*)>)?", name)
    if not m:
        return None
    base, args = m.group(1), m.group(2)
    if not args or "finalize" in base or "stats" in base:
        return base
    flags = [a.strip() for a in args.split(",")[1:]]
    keep = 2  # fwd_apply <T, RES, RELU, FIXED>, bwd_reduce <T, RELU, DRES>, bwd_apply <T, RELU, FIXED>
    if base == "bn_bwd_apply_kernel":
        keep = 1
    bits = ",".join("1" if f == "true" else "0" for f in flags[:keep])
    return f"{base}<{bits}>"


def load_profile(path, prog, batch=0):
    """The profile's JSON and its micro-batch (batch if given); exit 2 naming the file when it
    cannot be read or is not a ResNet-50 profile."""
    try:
        with open(path) as f:
            prof = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{prog}: {path}: {e}", file=sys.stderr)
        sys.exit(2)
    n = batch or int(prof.get("micro_batch", 0))
    if n < 1 or prof.get("model") != "resnet50":
        print(f"{prog}: {path}: not a resnet50 profile with a micro_batch", file=sys.stderr)
        sys.exit(2)
    return prof, n


def measured_families(prof):
    """Per kernel family of the profile's top list: {"ms", "calls"} a step."""
    measured = {}
    for t in prof.get("top", []):
        k = family_of(t["name"])
        if k:
            m = measured.setdefault(k, {"ms": 0.0, "calls": 0.0})
            m["ms"] += t["ms"]
            m["calls"] += t["calls"]
    return measured


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--peak-tbs", type=float, default=4.8, help="DRAM bandwidth, TB/s (H200 4.8, H100 SXM 3.35)")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--blocks-per-sm", type=int, default=4)
    ap.add_argument("--batch", type=int, default=0, help="micro-batch (default: the profile's)")
    a = ap.parse_args()
    prof, n = load_profile(a.profile, "bn_roofline", a.batch)
    fam = families(bn_layers(n), a.sms * a.blocks_per_sm)
    measured = measured_families(prof)
    print(f"ResNet-50 x {n}, {prof.get('name')} ({a.profile}); roofline {a.peak_tbs} TB/s\n")
    print("| kernel family | launches (profile) | GB moved | roofline ms | measured ms | TB/s | of peak | over roofline ms (µs a launch) |")
    print("|---|---|---|---|---|---|---|---|")
    tot_roof = tot_meas = 0.0
    for k in sorted(fam, key=lambda k: -measured.get(k, {"ms": 0})["ms"]):
        f, m = fam[k], measured.get(k)
        roof = f["bytes"] / (a.peak_tbs * 1e12) * 1e3
        if not m:  # out of the total: its measured time is unknown
            print(f"| `{k}` | {f['launches']} (not in the profile's top list) | {f['bytes'] / 1e9:.2f} | {roof:.3f} | – | – | – | – |")
            continue
        tot_roof += roof
        tot_meas += m["ms"]
        tbs = f["bytes"] / (m["ms"] * 1e-3) / 1e12
        over = m["ms"] - roof
        print(f"| `{k}` | {f['launches']} ({m['calls']:.0f}) | {f['bytes'] / 1e9:.2f} | {roof:.3f} | {m['ms']:.3f} | "
              f"{tbs:.2f} | {tbs / a.peak_tbs:.0%} | {over:.3f} ({over / f['launches'] * 1e3:.1f}) |")
    print(f"| all measured | | | {tot_roof:.3f} | {tot_meas:.3f} | | | {tot_meas - tot_roof:.3f} |")


if __name__ == "__main__":
    main()
