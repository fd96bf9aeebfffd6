// dgrad.cuh: the probe's DgradDreluBNBwdWeight cases: the data gradient of the convolution after
// a batch norm + ReLU, its dReLU, and the batch norm's backward sums in one engine, in place of
// the plain data gradient + the backward reduction pass (the engine's bn_bwd_reduce).
//
//   fused    dy, W -> ConvolutionBwdData (virtual) -> RELU_BWD against bn = (x - mean) invstd
//            scale + bias (virtual) -> g (written, dBNApply reads it) -> BN_BWD_WEIGHTS(g, x):
//            dscale, dbias and the coefficients of dx = eq_dy g + eq_x x + eq_bias
//   unfused  cuDNN's plain data gradient (written), then the probe's dReLU + reduction pass
//            (bn_bwd_sums, fp32; what the engine's bn_bwd_reduce does: read it and x)
// Checks: g elementwise against the plain data gradient masked here (check_drelu's bound);
// dscale, dbias per channel against float64 sums of the fused g: |d - d64| <= 2u sum|term| (the
// engine may sum g before its rounding; fp32 order far below u, as probe.cu's statistics);
// negative controls: g against the unmasked data gradient, the sums against the unmasked sums,
// must fail. The coefficients are compared with the textbook batch-norm backward
// (eq_dy = s invstd, eq_x = -s invstd^2 dscale / M, eq_bias = -eq_dy dbias / M - eq_x mean) and the
// largest relative difference printed: information, not a check (cuDNN does not document them).
#pragma once

#include "harness.h"

namespace probe {

enum : int64_t {
    G_DY = 1, G_W, G_X, G_M, G_V, G_S, G_B, G_G, G_DS, G_DB, G_EA, G_EB, G_EC,
    G_DX = 100, G_XM, G_XH, G_XS, G_BN
};

template <typename T>
Row run_dgrad(const Case& cs, const char* dtname, cudnnDataType_t dt, double u, const Args& a, cudnnHandle_t h,
              cudaStream_t st) {
    // The convolution maps C channels to K; its data gradient maps dy [N, K] back to [N, C], the
    // channels of the batch norm before it.
    const Shape z(cs, a, dtname);
    const int64_t N = z.N, C = z.C, K = z.K, HW = z.HW, R = z.R, pad = z.pad, rows = z.rows;
    const size_t ex = z.ein, ey = z.eout, ew = z.ew;
    const double terms = (double)(K * R * R);
    Row row;
    char buf[2048];

    Buf dy(ey * sizeof(T)), dyabs(ey * sizeof(T)), w(ew * sizeof(T)), wabs(ew * sizeof(T)), x(ex * sizeof(T));
    Buf gf(ex * sizeof(T)), gx(ex * sizeof(T)), sabs(ex * sizeof(T));
    Buf mean(C * 4), invstd(C * 4), s(C * 4), b(C * 4), outs(5 * C * 4), usums(4 * C * 4), d64(4 * C * 8);
    float wr = (float)std::sqrt(3.0 / terms);
    launch_fill((T*)dy.p, ey, 31, -1.f, 1.f, false, st);
    launch_fill((T*)w.p, ew, 32, -wr, wr, false, st);
    launch_fill((T*)x.p, ex, 33, -1.f, 1.f, false, st);
    launch_fill((float*)mean.p, (size_t)C, 34, -0.2f, 0.2f, false, st);
    launch_fill((float*)invstd.p, (size_t)C, 35, 0.8f, 1.25f, false, st);
    launch_fill((float*)s.p, (size_t)C, 36, 0.5f, 1.5f, false, st);
    launch_fill((float*)b.p, (size_t)C, 37, -0.5f, 0.5f, false, st);
    absolute<T><<<1024, 256, 0, st>>>((const T*)w.p, (T*)wabs.p, ew);
    absolute<T><<<1024, 256, 0, st>>>((const T*)dy.p, (T*)dyabs.p, ey);
    CU(cudaGetLastError());
    float* o = (float*)outs.p;  // dscale, dbias, eq_dy, eq_x, eq_bias

    Built fb = build_and_search(h, {CUDNN_DATA_FLOAT, dt}, dtname, a.max_plans, [&](Graph& g, cudnnDataType_t it) {
        auto& DY = g.tensor(G_DY, dt, N, K, HW, HW, false);
        auto& W = g.tensor(G_W, dt, K, C, R, R, false);
        auto& X = g.tensor(G_X, dt, N, C, HW, HW, false);
        auto& M = g.tensor(G_M, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& V = g.tensor(G_V, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& S = g.tensor(G_S, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& B = g.tensor(G_B, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& G = g.tensor(G_G, dt, N, C, HW, HW, false);
        auto& DS = g.tensor(G_DS, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& DB = g.tensor(G_DB, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& EA = g.tensor(G_EA, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& EB = g.tensor(G_EB, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& EC = g.tensor(G_EC, CUDNN_DATA_FLOAT, 1, C, 1, 1, false);
        auto& vdx = g.tensor(G_DX, it, N, C, HW, HW, true);
        auto& vxm = g.tensor(G_XM, it, N, C, HW, HW, true);
        auto& vxh = g.tensor(G_XH, it, N, C, HW, HW, true);
        auto& vxs = g.tensor(G_XS, it, N, C, HW, HW, true);
        auto& vbn = g.tensor(G_BN, it, N, C, HW, HW, true);
        g.conv_dgrad(DY, W, vdx, pad);
        g.pointwise(CUDNN_POINTWISE_SUB, X, &M, vxm);
        g.pointwise(CUDNN_POINTWISE_MUL, vxm, &V, vxh);
        g.pointwise(CUDNN_POINTWISE_MUL, vxh, &S, vxs);
        g.pointwise(CUDNN_POINTWISE_ADD, vxs, &B, vbn);
        g.pointwise_bwd(CUDNN_POINTWISE_RELU_BWD, vdx, vbn, G);
        g.bn_bwd_weights(G, X, M, V, S, DS, DB, EA, EB, EC);
    });
    const Search& fs = fb.search;

    Built pb = plain_conv(h, Case::DGRAD, dt, dtname, z, a.max_plans);
    std::vector<std::shared_ptr<Buf>> ws;
    Timed plain;
    if (!fastest_or_row(h, st, a, pb, "plain data gradient", {1, 2, 3}, {dy.p, w.p, gx.p}, ws, plain, row,
                        cs.name, dtname)) return row;
    const int blocks = 132 * 8;
    auto reduce32 = [&] {
        CU(cudaMemsetAsync(usums.p, 0, 4 * C * 4, st));
        bn_bwd_sums<T, float><<<blocks, 256, 0, st>>>((const T*)gx.p, (const T*)x.p, (const float*)mean.p,
                                                      (const float*)invstd.p, (const float*)s.p, (const float*)b.p,
                                                      rows, (int)C, 1, (float*)usums.p);
    };
    const double t_reduce = time_ms(st, a.warmup, a.iters, reduce32);
    const double floor_reduce = 4.0 * ex / (a.peak_tbs * 1e12) * 1e3;  // read the gradient and x
    // References: the plain data gradient (left in gx) and the one of |dy|, |W| (the bound's S).
    execute(h, *plain.plan, *plain.pack);
    ws.push_back(std::make_shared<Buf>((size_t)plain.plan->workspace));
    auto abs_pack = variant_pack({1, 2, 3}, {dyabs.p, wabs.p, sabs.p}, ws.back()->p);
    execute(h, *plain.plan, *abs_pack);
    CU(cudaStreamSynchronize(st));

    if (fs.plans.empty())
        return unsupported(cs, dtname, a.n, fs,
                           fmt("%.3f | %.3f (%.3f) | – | – | – | – | –", plain.ms, t_reduce, floor_reduce),
                           fmt("\"plain_ms\":%.4f,\"reduce_ms\":%.4f", plain.ms, t_reduce));
    Timed fused;
    if (!fastest_or_row(h, st, a, fb, "fused DgradDreluBNBwdWeight",
                        {G_DY, G_W, G_X, G_M, G_V, G_S, G_B, G_G, G_DS, G_DB, G_EA, G_EB, G_EC},
                        {dy.p, w.p, x.p, mean.p, invstd.p, s.p, b.p, gf.p, o, o + C, o + 2 * C, o + 3 * C, o + 4 * C},
                        ws, fused, row, cs.name, dtname)) return row;
    CU(cudaMemsetAsync(outs.p, 0, 5 * C * 4, st));
    execute(h, *fused.plan, *fused.pack);

    // g, elementwise (masked: the check; unmasked: the control).
    Buf cnt(16), mx(4);
    auto gcheck = [&](int mask, unsigned long long* counts, float& worst) {
        CU(cudaMemsetAsync(cnt.p, 0, 16, st));
        CU(cudaMemsetAsync(mx.p, 0, 4, st));
        check_drelu<T><<<blocks, 256, 0, st>>>((const T*)gf.p, (const T*)gx.p, (const T*)sabs.p, (const T*)x.p,
                                               (const float*)mean.p, (const float*)invstd.p, (const float*)s.p,
                                               (const float*)b.p, ex, (int)C, mask, (float)u,
                                               (float)(2 * terms * std::ldexp(1.0, -24)),
                                               (unsigned long long*)cnt.p, (unsigned int*)mx.p);
        CU(cudaGetLastError());
        unsigned int bits = 0;
        CU(cudaMemcpyAsync(counts, cnt.p, 16, cudaMemcpyDeviceToHost, st));
        CU(cudaMemcpyAsync(&bits, mx.p, 4, cudaMemcpyDeviceToHost, st));
        CU(cudaStreamSynchronize(st));
        std::memcpy(&worst, &bits, 4);
    };
    unsigned long long gc[2] = {0, 0}, nc[2] = {0, 0};
    float gworst = 0, nworst = 0;
    gcheck(1, gc, gworst);
    gcheck(0, nc, nworst);

    // The sums: float64 over the fused g (as it is) and over the unmasked plain gradient (control).
    auto sums64 = [&](const void* g, std::vector<double>& v) {
        CU(cudaMemsetAsync(d64.p, 0, 4 * C * 8, st));
        bn_bwd_sums<T, double><<<blocks, 256, 0, st>>>((const T*)g, (const T*)x.p, (const float*)mean.p,
                                                       (const float*)invstd.p, (const float*)s.p, (const float*)b.p,
                                                       rows, (int)C, 0, (double*)d64.p);
        CU(cudaGetLastError());
        v.resize(4 * C);
        CU(cudaMemcpyAsync(v.data(), d64.p, 4 * C * 8, cudaMemcpyDeviceToHost, st));
        CU(cudaStreamSynchronize(st));
    };
    std::vector<double> ref, neg;
    sums64(gf.p, ref);
    sums64(gx.p, neg);
    std::vector<float> out(5 * C), hs(C), hm(C), hv(C);
    CU(cudaMemcpy(out.data(), outs.p, 5 * C * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(hs.data(), s.p, C * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(hm.data(), mean.p, C * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(hv.data(), invstd.p, C * 4, cudaMemcpyDeviceToHost));
    auto sums_bad = [&](const std::vector<double>& r, double& worst) {
        int bad = 0;
        worst = 0;
        for (int64_t c = 0; c < C; c++) {
            double e1 = std::fabs(out[C + c] - r[c]) / (2 * u * r[2 * C + c] + 1e-300);      // dbias = sum g
            double e2 = std::fabs(out[c] - r[C + c]) / (2 * u * r[3 * C + c] + 1e-300);      // dscale = sum g x^
            if (!(e1 <= 1) || !(e2 <= 1)) bad++;
            double e = std::max(e1, e2);
            worst = std::isnan(e) ? INFINITY : std::max(worst, e);
        }
        return bad;
    };
    double sworst = 0, snworst = 0;
    int sbad = sums_bad(ref, sworst), snbad = sums_bad(neg, snworst);
    // The coefficients against the textbook backward, from the fused dscale and dbias (information).
    double da = 0, db = 0, dc = 0, m = (double)rows;
    for (int64_t c = 0; c < C; c++) {
        double A = (double)hs[c] * hv[c], B = -(double)hs[c] * hv[c] * hv[c] * out[c] / m;
        double Cc = -A * out[C + c] / m - B * hm[c];
        da = std::max(da, std::fabs(out[2 * C + c] - A) / (std::fabs(A) + 1e-30));
        db = std::max(db, std::fabs(out[3 * C + c] - B) / (std::fabs(B) + 1e-30));
        dc = std::max(dc, std::fabs(out[4 * C + c] - Cc) / (std::fabs(Cc) + std::fabs(B * hm[c]) + 1e-30));
    }
    const bool g_ok = gc[0] == 0, s_ok = sbad == 0, n_ok = nc[0] > 0 && snbad > 0;
    row.failed = !(g_ok && s_ok && n_ok);
    const double saved_floor = plain.ms + floor_reduce - fused.ms;
    std::snprintf(buf, sizeof buf,
                  "| %s | %s | %s | engine %lld (%s, heuristic %s, intermediates %s) | %.3f | %.3f | %.3f (%.3f) | %+.3f "
                  "| %s (%llu of %zu over, worst %.2f; %llu at the ReLU's edge skipped) | %s (%d of %lld channels over, "
                  "worst %.2f) | %s (%llu elements, %d channels) | eq_dy %.1e, eq_x %.1e, eq_bias %.1e |",
                  cs.name, dtname, found(fs).c_str(), (long long)fused.plan->engine,
                  fused.plan->runtime_compiled ? "runtime-compiled" : "pre-compiled", fused.plan->mode.c_str(),
                  fb.variant.c_str(), fused.ms, plain.ms, t_reduce, floor_reduce, saved_floor, g_ok ? "ok" : "**FAIL**",
                  gc[0], ex, gworst, gc[1], s_ok ? "ok" : "**FAIL**", sbad, (long long)C, sworst,
                  n_ok ? "fail as they must" : "**DID NOT FAIL**", nc[0], snbad, da, db, dc);
    row.line = buf;
    std::snprintf(buf, sizeof buf,
                  "{\"case\":\"%s\",\"dtype\":\"%s\",\"n\":%d,\"fused_supported\":true,\"engine\":%lld,"
                  "\"runtime_compiled\":%s,\"intermediates\":\"%s\",\"fused_ms\":%.4f,\"plain_ms\":%.4f,"
                  "\"reduce_ms\":%.4f,\"reduce_floor_ms\":%.4f,\"saved_vs_floor_ms\":%.4f,\"g_ok\":%s,"
                  "\"sums_ok\":%s,\"controls_fail\":%s,\"coef_rel_diff\":[%.3g,%.3g,%.3g]}",
                  cs.name, dtname, a.n, (long long)fused.plan->engine, fused.plan->runtime_compiled ? "true" : "false",
                  fb.variant.c_str(), fused.ms, plain.ms, t_reduce, floor_reduce, saved_floor, g_ok ? "true" : "false",
                  s_ok ? "true" : "false", n_ok ? "true" : "false", da, db, dc);
    row.json = buf;
    return row;
}

}  // namespace probe
