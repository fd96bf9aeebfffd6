#!/usr/bin/env python3
"""bn_fusion_model.py: a PREDICTION of the batch-norm kernel time that cuDNN's ResNet
fusions (ConvBNfprop, ConvBNwgrad, DgradDreluBNBwdWeight; docs/resnet-fusion.md) would
remove from the engine's ResNet-50 step, from a kernel profile of today's engine
(gpu-check's profile stage, profiles.tgz: resnet50-engine-*.json).

  python3 bench/reference/bn_fusion_model.py PROFILE.json [--peak-tbs 3.35] [--step-ms 56.7]

What each batch norm keeps and loses (the MLPerf-style mapping, per layer of bn_roofline's
model of ResNet-50; E = N H W C elements, 2-byte activations):

  bn1, bn2 (32)     statistics pass: gone (GenStats in the producing convolution's epilogue)
                    apply pass: gone (scale-bias-ReLU in the consuming convolution's prologue,
                      and again in its weight gradient's, ConvBNwgrad)
                    backward reduction: gone (DgradDreluBNBwdWeight: in the epilogue of the
                      consuming convolution's data gradient), but that epilogue reads the
                      batch norm's input (2E) again: the range's low end pays it at --peak-tbs
                    backward apply (dBNApply): stays, same bytes
  bn3 (16)          statistics: gone (GenStats of conv3); apply with residual and ReLU: stays
                    (the block's output is the next block's input and residual); backward:
                    stays (two gradients and the residual's: DReluForkDNorm is two passes too)
  downsample (4)    statistics: gone; apply: gone (its scale and shift read by bn3's apply,
                    which reads the raw downsample output instead: same bytes); backward: stays
  stem (1)          nothing: the engine's stem is its own matrix product, not a cuDNN convolution

A family's removed time is its measured time times the removed launches' share of its
modelled bytes (each launch at the family's average speed). Finalizers stay (cuDNN's BN
finalize or the engine's replaces them launch for launch). Not modelled: what the fused
convolutions cost over today's plain ones (the probe, engine/native/tools/cudnn_fusion,
measures it per layer shape); the table states the break-even.
"""
import argparse

import bn_roofline


def role(name):
    """Which mapping a batch norm of bn_roofline.bn_layers follows."""
    if name == "stem":
        return "stem"
    if name.endswith(".down"):
        return "down"
    return name.rsplit(".", 1)[1]  # bn1, bn2, bn3


def removed(layers, blocks, peak_tbs, measured):
    """Per family: (measured ms, removed ms low, removed ms high, launches removed)."""
    per_family = {}
    for layer in layers:
        name, c, m = layer[0], layer[1], layer[2]
        r = role(name)
        e = m * c
        for key, f in bn_roofline.families([layer], blocks).items():
            d = per_family.setdefault(key, {"bytes": 0.0, "gone": 0.0, "extra": 0.0, "launches": 0})
            d["bytes"] += f["bytes"]
            gone = False
            if key == "bn_fwd_stats_kernel":
                gone = r != "stem"
            elif key.startswith("bn_fwd_apply_kernel"):
                gone = r in ("bn1", "bn2", "down")
            elif key.startswith("bn_bwd_reduce_kernel"):
                gone = r in ("bn1", "bn2")
                if gone:
                    d["extra"] += 2 * e  # the data gradient's epilogue reads x again
            if gone:
                d["gone"] += f["bytes"]
                d["launches"] += 1
    out = {}
    for key, d in per_family.items():
        ms = measured.get(key)
        if ms is None:
            continue
        share = d["gone"] / d["bytes"] if d["bytes"] else 0.0
        high = ms * share
        low = max(0.0, high - d["extra"] / (peak_tbs * 1e12) * 1e3)
        out[key] = (ms, low, high, d["launches"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--peak-tbs", type=float, default=3.35, help="DRAM bandwidth, TB/s (H100 SXM 3.35, H200 4.8)")
    ap.add_argument("--step-ms", type=float, default=0.0, help="today's step (graphs) to predict from")
    ap.add_argument("--target", type=float, default=7200.0, help="img/s the step must reach")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--blocks-per-sm", type=int, default=4)
    a = ap.parse_args()
    prof, n = bn_roofline.load_profile(a.profile, "bn_fusion_model")
    measured = {k: m["ms"] for k, m in bn_roofline.measured_families(prof).items()}
    rows = removed(bn_roofline.bn_layers(n), a.sms * a.blocks_per_sm, a.peak_tbs, measured)
    print(f"PREDICTION, ResNet-50 x {n}, {prof.get('name')} ({a.profile}): batch-norm kernel time the fp16 "
          f"cuDNN fusions would remove (docs/resnet-fusion.md)\n")
    print("| kernel family | measured ms | launches removed | removed ms (low–high) | stays ms |")
    print("|---|---|---|---|---|")
    tot = [0.0, 0.0, 0.0]
    for key in sorted(rows, key=lambda k: -rows[k][2]):
        ms, low, high, nrem = rows[key]
        tot[0] += ms
        tot[1] += low
        tot[2] += high
        print(f"| `{key}` | {ms:.3f} | {nrem} | {low:.3f}–{high:.3f} | {ms - high:.3f}–{ms - low:.3f} |")
    print(f"| all in the profile's top list | {tot[0]:.3f} | | **{tot[1]:.3f}–{tot[2]:.3f}** | "
          f"{tot[0] - tot[2]:.3f}–{tot[0] - tot[1]:.3f} |")
    if a.step_ms > 0:
        need = a.step_ms - n / a.target * 1e3
        print(f"\nStep {a.step_ms:.2f} ms -> {a.step_ms - tot[2]:.2f}–{a.step_ms - tot[1]:.2f} ms before the fused "
              f"convolutions' own extra cost ({n / (a.step_ms - tot[1]) * 1e3:,.0f}–"
              f"{n / (a.step_ms - tot[2]) * 1e3:,.0f} img/s). {a.target:,.0f} img/s needs {need:.2f} ms off the step: "
              f"the fused convolutions may cost at most {tot[1] - need:.2f}–{tot[2] - need:.2f} ms more than today's "
              f"(break-even for the target).")


if __name__ == "__main__":
    main()
