// wgrad.cuh: the probe's ConvBNwgrad cases. The forward fusion removes the batch norm's apply
// pass only if the weight gradient can recompute the activation from the batch norm's input;
// ConvBNwgrad does that: X -> scale -> bias -> ReLU -> weight gradient with dy, in one engine.
//
//   fused    one graph: [X*s+b -> ReLU] (virtual) -> ConvolutionBwdFilter(dy) -> dW
//   plain    cuDNN's plain weight gradient of the activation the unfused apply wrote
// Both timed as in probe.cu (fastest of up to --max-plans, median of --iters). The extra time of
// the fused one is what the fusion adds to the backward; the apply pass it makes unnecessary is
// the forward's (its time and floor are printed beside).
//
// Check: dW is a sum of M = N H W products, too many for a worst-case rounding bound to mean
// anything, so both dW are compared at 64 sampled filter elements with a float64 sum of the
// same products (wgrad_ref), under |dW - ref| <= 2u|ref| + 6 (u + 2^-24 sqrt(M)) sqrt(sum of the
// squared products): the output's rounding, and at least six standard deviations of independent
// roundings of each product's activation (u, the fused side may round it differently) and of the
// fp32 partial sums (2^-24 sqrt(M)). The plain weight gradient must pass it too (a check of the
// reference and the bound); the fused one against the reference without the prologue must fail.
#pragma once

#include "harness.h"

namespace probe {

enum : int64_t { W_X = 1, W_S, W_B, W_DY, W_DW, W_SCALED = 100 };

struct SampleCheck {
    int bad = 0;
    double worst = 0;
};

inline SampleCheck check_samples(const std::vector<float>& dw, const std::vector<int64_t>& idx,
                                 const std::vector<double>& ref, double u, double m) {
    SampleCheck r;
    for (size_t i = 0; i < idx.size(); i++) {
        double sum = ref[2 * i], sq = ref[2 * i + 1];
        double tol = 2 * u * std::fabs(sum) + 6 * (u + std::ldexp(1.0, -24) * std::sqrt(m)) * std::sqrt(sq) + 1e-300;
        double e = std::fabs(dw[(size_t)idx[i]] - sum) / tol;
        if (!(e <= 1)) r.bad++;
        r.worst = std::isnan(e) ? INFINITY : std::max(r.worst, e);
    }
    return r;
}

template <typename T>
Row run_wgrad(const Case& cs, const char* dtname, cudnnDataType_t dt, double u, const Args& a, cudnnHandle_t h,
              cudaStream_t st) {
    const Shape z(cs, a, dtname);
    const int64_t N = z.N, C = z.C, K = z.K, HW = z.HW, R = z.R, pad = z.pad, rows = z.rows;
    const size_t ein = z.ein, eout = z.eout, ew = z.ew;
    Row row;
    char buf[2048];

    Buf x(ein * sizeof(T)), act(ein * sizeof(T)), dy(eout * sizeof(T)), dwf(ew * sizeof(T)), dwu(ew * sizeof(T));
    Buf s(C * sizeof(T)), b(C * sizeof(T)), wide(ew * sizeof(float));
    launch_fill((T*)x.p, ein, 21, -1.f, 1.f, false, st);
    launch_fill((T*)dy.p, eout, 22, -1.f, 1.f, false, st);
    launch_fill((T*)s.p, (size_t)C, 23, 0.5f, 1.5f, false, st);
    launch_fill((T*)b.p, (size_t)C, 24, -0.5f, 0.5f, false, st);
    auto apply = [&] {
        bn_relu_apply<T><<<132 * 8, 256, 0, st>>>((const T*)x.p, (const T*)s.p, (const T*)b.p, (T*)act.p, ein, (int)C);
    };
    apply();
    CU(cudaStreamSynchronize(st));

    // The fused graph: intermediates fp32 first, the I/O type if no engine takes fp32 (NVIDIA's
    // ConvBNwgrad sample declares them HALF).
    Built fb = build_and_search(h, {CUDNN_DATA_FLOAT, dt}, dtname, a.max_plans, [&](Graph& g, cudnnDataType_t it) {
        auto& X = g.tensor(W_X, dt, N, C, HW, HW, false);
        auto& DY = g.tensor(W_DY, dt, N, K, HW, HW, false);
        auto& DW = g.tensor(W_DW, dt, K, C, R, R, false);
        g.conv_wgrad(g.scale_bias_relu(X, W_S, W_SCALED, dt, it, N, C, HW, HW), DY, DW, pad);
    });
    const Search& fs = fb.search;

    Built pb = plain_conv(h, Case::WGRAD, dt, dtname, z, a.max_plans);
    std::vector<std::shared_ptr<Buf>> ws;
    Timed plain;
    if (!fastest_or_row(h, st, a, pb, "plain weight gradient", {1, 2, 3}, {act.p, dy.p, dwu.p}, ws, plain,
                        row, cs.name, dtname)) return row;
    const double t_apply = time_ms(st, a.warmup, a.iters, apply);
    const double floor_apply = 4.0 * ein / (a.peak_tbs * 1e12) * 1e3;
    if (fs.plans.empty())
        return unsupported(cs, dtname, a.n, fs, fmt("%.3f | – | %.3f (%.3f) | – | – | –", plain.ms, t_apply, floor_apply),
                           fmt("\"plain_ms\":%.4f,\"apply_ms\":%.4f", plain.ms, t_apply));
    Timed fused;
    if (!fastest_or_row(h, st, a, fb, "fused ConvBNwgrad", {W_X, W_S, W_B, W_DY, W_DW},
                        {x.p, s.p, b.p, dy.p, dwf.p}, ws, fused, row, cs.name, dtname)) return row;
    execute(h, *plain.plan, *plain.pack);
    execute(h, *fused.plan, *fused.pack);

    // 64 sampled filter elements (7919 is prime to every filter size here: distinct samples).
    const int ns = (int)std::min<size_t>(64, ew);
    std::vector<int64_t> idx(ns);
    for (int i = 0; i < ns; i++) idx[i] = (int64_t)(((size_t)i * 7919 + 13) % ew);
    Buf didx(ns * 8), dref(ns * 16), dneg(ns * 16);
    CU(cudaMemcpyAsync(didx.p, idx.data(), ns * 8, cudaMemcpyHostToDevice, st));
    wgrad_ref<T><<<ns, 256, 0, st>>>((const T*)x.p, (const T*)s.p, (const T*)b.p, (const T*)dy.p, (int)N, (int)HW,
                                     (int)C, (int)K, (int)R, (int)pad, (const int64_t*)didx.p, 1, (double*)dref.p);
    wgrad_ref<T><<<ns, 256, 0, st>>>((const T*)x.p, (const T*)s.p, (const T*)b.p, (const T*)dy.p, (int)N, (int)HW,
                                     (int)C, (int)K, (int)R, (int)pad, (const int64_t*)didx.p, 0, (double*)dneg.p);
    CU(cudaGetLastError());
    std::vector<double> ref(2 * ns), neg(2 * ns);
    std::vector<float> f(ew), uf(ew);
    CU(cudaMemcpyAsync(ref.data(), dref.p, ns * 16, cudaMemcpyDeviceToHost, st));
    CU(cudaMemcpyAsync(neg.data(), dneg.p, ns * 16, cudaMemcpyDeviceToHost, st));
    widen<T><<<64, 256, 0, st>>>((const T*)dwf.p, (float*)wide.p, ew);
    CU(cudaMemcpyAsync(f.data(), wide.p, ew * 4, cudaMemcpyDeviceToHost, st));
    widen<T><<<64, 256, 0, st>>>((const T*)dwu.p, (float*)wide.p, ew);
    CU(cudaMemcpyAsync(uf.data(), wide.p, ew * 4, cudaMemcpyDeviceToHost, st));
    CU(cudaStreamSynchronize(st));
    const double m = (double)rows;
    SampleCheck cf = check_samples(f, idx, ref, u, m), cu_ = check_samples(uf, idx, ref, u, m),
                cn = check_samples(f, idx, neg, u, m);
    const bool f_ok = cf.bad == 0, u_ok = cu_.bad == 0, n_ok = cn.bad > 0;
    row.failed = !(f_ok && u_ok && n_ok);
    std::snprintf(buf, sizeof buf,
                  "| %s | %s | %s | engine %lld (%s, heuristic %s, intermediates %s) | %.3f | %.3f | %+.3f | %.3f (%.3f) "
                  "| %s (%d of %d over, worst %.2f of bound) | %s (%d over, worst %.2f) | %s (%d of %d) |",
                  cs.name, dtname, found(fs).c_str(), (long long)fused.plan->engine,
                  fused.plan->runtime_compiled ? "runtime-compiled" : "pre-compiled", fused.plan->mode.c_str(),
                  fb.variant.c_str(), fused.ms, plain.ms, fused.ms - plain.ms, t_apply, floor_apply,
                  f_ok ? "ok" : "**FAIL**", cf.bad, ns, cf.worst, u_ok ? "ok" : "**FAIL**", cu_.bad, cu_.worst,
                  n_ok ? "fails as it must" : "**DID NOT FAIL**", cn.bad, ns);
    row.line = buf;
    std::snprintf(buf, sizeof buf,
                  "{\"case\":\"%s\",\"dtype\":\"%s\",\"n\":%d,\"fused_supported\":true,\"engine\":%lld,"
                  "\"runtime_compiled\":%s,\"intermediates\":\"%s\",\"fused_ms\":%.4f,\"plain_ms\":%.4f,"
                  "\"extra_ms\":%.4f,\"apply_ms\":%.4f,\"apply_floor_ms\":%.4f,\"dw_ok\":%s,\"dw_worst\":%.4g,"
                  "\"reference_ok\":%s,\"control_fails\":%s}",
                  cs.name, dtname, a.n, (long long)fused.plan->engine, fused.plan->runtime_compiled ? "true" : "false",
                  fb.variant.c_str(), fused.ms, plain.ms, fused.ms - plain.ms, t_apply, floor_apply, f_ok ? "true" : "false",
                  cf.worst, u_ok ? "true" : "false", n_ok ? "true" : "false");
    row.json = buf;
    return row;
}

}  // namespace probe
