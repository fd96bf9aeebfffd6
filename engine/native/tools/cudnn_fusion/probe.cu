// cudnn_fusion_probe: do cuDNN's ResNet fusions, ConvBNfprop (scale-bias-ReLU prologue +
// convolution + per-channel statistics epilogue), ConvBNwgrad (the same prologue recomputed in
// the weight gradient; wgrad.cuh) and DgradDreluBNBwdWeight (data gradient + dReLU + batch norm's
// backward sums; dgrad.cuh), run on this GPU for ResNet-50's layer shapes, are they right,
// and what do they save against the unfused passes (docs/resnet-fusion.md)? Issue 41's spike; not
// part of the engine (build.sh beside this file builds it; scripts/gpu-next/cudnn-fusion.sh runs it).
//
// For each ConvBNfprop case (a ResNet-50 layer at micro-batch --n) and data type (fp16, bf16):
//   fused    one cuDNN graph: [X*s+b -> ReLU ->] conv(W) -> Y, GenStats(Y) -> sum, sqsum
//   unfused  the probe's apply kernel (a = ReLU(X*s+b), written), cuDNN's plain convolution
//            (a graph of the one op), the probe's fp32 statistics kernel over Y
// Engine configs come from heuristics mode A (FALLBACK if A yields no plan that finalizes); up to
// --max-plans of them are timed and the fastest kept, for both sides alike.
//
// Checks (the fused results against the unfused path computed here, same inputs):
//   Y      |Yf - Yu| <= 2u|Yu| + (2u + 2 K 2^-24) S  elementwise, S = conv(a, |W|) >= |each term|
//          sum, u the unit roundoff of the type (2^-11 fp16, 2^-8 bf16), K = C R S terms:
//          each side rounds its output once (u|Y| each), may round the prologue's output before
//          the tensor cores (u S each; no such term without a prologue), and sums K products in
//          fp32 in its own order (K 2^-24 S each, the worst case of recursive summation).
//   stats  per channel |sum - sum64| <= 2u sum|Y|, |sqsum - sqsum64| <= 4u sum Y^2 against a
//          float64 reduction of Yf: GenStats may sum Y before its rounding to the type (u|Y| an
//          element, 2u Y^2 for the square), doubled as the allowance for fp32 accumulation order
//          (over at most 2^21 terms summed in blocks, far below u).
//   negative controls: the same two checks of the fused results against conv(a, |W|) must fail,
//          so the bounds can tell a wrong result from a right one.
// Timing: CUDA events around each run, --warmup runs discarded, the median of --iters.
// Output: a Markdown table per pattern, and one "RESULT {json}" line per case and type. Exit 0 when every
// supported case passes its checks (an unsupported case is a finding, reported, not a failure),
// 1 when a check fails, 2 for bad flags or no usable GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "dgrad.cuh"
#include "wgrad.cuh"

namespace {

using namespace probe;

const Case kCases[] = {
    {Case::FPROP, "1x1-64-256", 64, 256, 56, 1, true, "layer1 conv3: bn2's scale-bias-ReLU, conv3, bn3's statistics"},
    {Case::FPROP, "3x3-64-64", 64, 64, 56, 3, true, "layer1 conv2: bn1's scale-bias-ReLU, conv2, bn2's statistics"},
    {Case::FPROP, "1x1-256-64", 256, 64, 56, 1, false,
     "layer1.1 conv1: the block's input (a ReLU output), conv1, bn1's statistics"},
    {Case::WGRAD, "wgrad-1x1-64-256", 64, 256, 56, 1, true,
     "layer1 conv3's weight gradient, bn2's scale-bias-ReLU recomputed on its input"},
    {Case::WGRAD, "wgrad-3x3-64-64", 64, 64, 56, 3, true,
     "layer1 conv2's weight gradient, bn1's scale-bias-ReLU recomputed on its input"},
    {Case::DGRAD, "dgrad-1x1-64-256", 64, 256, 56, 1, true, "layer1 conv3's data gradient, bn2's dReLU and backward sums"},
    {Case::DGRAD, "dgrad-3x3-64-64", 64, 64, 56, 3, true, "layer1 conv2's data gradient, bn1's dReLU and backward sums"},
};

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr,
                 "cudnn_fusion_probe: %s\n"
                 "usage: cudnn_fusion_probe [--n 384] [--iters 30] [--warmup 5] [--max-plans 6] [--peak-tbs 3.35]\n"
                 "       [--dtype half,bf16] [--case NAME,...]  (cases: 1x1-64-256 3x3-64-64 1x1-256-64\n"
                 "       wgrad-1x1-64-256 wgrad-3x3-64-64 dgrad-1x1-64-256 dgrad-3x3-64-64)\n",
                 msg.c_str());
    std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t p = 0;
    while (p <= s.size()) {
        size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        if (q > p) out.push_back(s.substr(p, q - p));
        p = q + 1;
    }
    return out;
}

int parse_int(const std::string& flag, const char* v, int lo, int hi) {
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi)
        usage("flag " + flag + ": '" + v + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return (int)x;
}

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string f = argv[i];
        if (f == "-h" || f == "--help") usage("help");
        if (i + 1 >= argc) usage("flag " + f + " needs a value");
        const char* v = argv[++i];
        if (f == "--n") a.n = parse_int(f, v, 1, 4096);
        else if (f == "--iters") a.iters = parse_int(f, v, 1, 10000);
        else if (f == "--warmup") a.warmup = parse_int(f, v, 0, 10000);
        else if (f == "--max-plans") a.max_plans = parse_int(f, v, 1, 64);
        else if (f == "--peak-tbs") {
            char* end = nullptr;
            a.peak_tbs = std::strtod(v, &end);
            if (!*v || *end || !(a.peak_tbs > 0)) usage("flag --peak-tbs: '" + std::string(v) + "' is not a positive number");
        } else if (f == "--dtype") {
            a.dtypes = split(v);
            for (auto& d : a.dtypes)
                if (d != "half" && d != "bf16") usage("flag --dtype: '" + d + "' is not half or bf16");
            if (a.dtypes.empty()) usage("flag --dtype: empty");
        } else if (f == "--case") {
            a.cases = split(v);
            for (auto& c : a.cases) {
                bool ok = false;
                for (auto& k : kCases) ok |= c == k.name;
                if (!ok) usage("flag --case: unknown case '" + c + "'");
            }
        } else usage("unknown flag " + f);
    }
    return a;
}

template <typename T>
Row run_fprop(const Case& cs, const char* dtname, cudnnDataType_t dt, double u, const Args& a, cudnnHandle_t h,
             cudaStream_t st) {
    const Shape z(cs, a, dtname);
    const int64_t N = z.N, C = z.C, K = z.K, HW = z.HW, R = z.R, pad = z.pad, rows = z.rows;
    const size_t ein = z.ein, eout = z.eout, ew = z.ew;
    const double terms = (double)(C * R * R);
    Row row;
    char buf[2048];

    Buf x(ein * sizeof(T)), act(cs.prologue ? ein * sizeof(T) : 16), w(ew * sizeof(T)), wabs(ew * sizeof(T));
    Buf s(C * sizeof(T)), b(C * sizeof(T)), yf(eout * sizeof(T)), yu(eout * sizeof(T)), sabs(eout * sizeof(T));
    Buf sum(K * 4), sq(K * 4), usum(K * 4), usq(K * 4), d64(3 * K * 8);
    // Inputs: x in [-1, 1] (ReLU'd where it is a block's input), w scaled to keep Y of order 1,
    // batch norm's scale in [0.5, 1.5] and shift in [-0.5, 0.5].
    float wr = (float)std::sqrt(3.0 / terms);
    launch_fill((T*)x.p, ein, 11, -1.f, 1.f, !cs.prologue, st);
    launch_fill((T*)w.p, ew, 12, -wr, wr, false, st);
    launch_fill((T*)s.p, (size_t)C, 13, 0.5f, 1.5f, false, st);
    launch_fill((T*)b.p, (size_t)C, 14, -0.5f, 0.5f, false, st);
    absolute<T><<<1024, 256, 0, st>>>((const T*)w.p, (T*)wabs.p, ew);
    CU(cudaGetLastError());
    void* conv_in = cs.prologue ? act.p : x.p;  // the unfused convolution's input
    auto apply = [&] {
        bn_relu_apply<T><<<132 * 8, 256, 0, st>>>((const T*)x.p, (const T*)s.p, (const T*)b.p, (T*)act.p, ein, (int)C);
    };
    if (cs.prologue) apply();
    CU(cudaStreamSynchronize(st));

    // The fused graph; GenStats' math precision fp32 first, the I/O type if no engine takes fp32.
    Built fb = build_and_search(h, {CUDNN_DATA_FLOAT, dt}, dtname, a.max_plans, [&](Graph& g, cudnnDataType_t prec) {
        auto& X = g.tensor(U_X, dt, N, C, HW, HW, false);
        auto& W = g.tensor(U_W, dt, K, C, R, R, false);
        auto& Y = g.tensor(U_Y, dt, N, K, HW, HW, false);
        auto& SUM = g.tensor(U_SUM, CUDNN_DATA_FLOAT, 1, K, 1, 1, false);
        auto& SQ = g.tensor(U_SQ, CUDNN_DATA_FLOAT, 1, K, 1, 1, false);
        if (cs.prologue) {
            g.conv_fwd(g.scale_bias_relu(X, U_S, V_SCALED, dt, CUDNN_DATA_FLOAT, N, C, HW, HW), W, Y, pad);
        } else {
            g.conv_fwd(X, W, Y, pad);
        }
        g.genstats(Y, SUM, SQ, prec);
    });
    const Search& fs = fb.search;

    // The unfused convolution: a graph of the one op.
    Built ub = plain_conv(h, Case::FPROP, dt, dtname, z, a.max_plans);
    std::vector<std::shared_ptr<Buf>> ws;
    Timed conv;
    if (!fastest_or_row(h, st, a, ub, "plain convolution", {1, 2, 3}, {conv_in, w.p, yu.p}, ws, conv, row,
                        cs.name, dtname))
        return row;  // the reference itself is missing: nothing here can be trusted
    // S = conv(a, |W|), for the bounds: the fastest plan again, with its own workspace.
    Timed conv_abs;
    ws.push_back(std::make_shared<Buf>((size_t)conv.plan->workspace));
    conv_abs.pack = variant_pack({1, 2, 3}, {conv_in, wabs.p, sabs.p}, ws.back()->p);

    const int stat_blocks = 132 * 8;
    auto stats32 = [&] {
        CU(cudaMemsetAsync(usum.p, 0, K * 4, st));
        CU(cudaMemsetAsync(usq.p, 0, K * 4, st));
        channel_stats<T, float><<<stat_blocks, 256, 0, st>>>((const T*)yu.p, rows, (int)K, (float*)usum.p,
                                                              (float*)usq.p, (float*)nullptr);
    };
    double t_conv = conv.ms;
    double t_apply = cs.prologue ? time_ms(st, a.warmup, a.iters, apply) : 0.0;
    double t_stats = time_ms(st, a.warmup, a.iters, stats32);
    double t_seq = time_ms(st, a.warmup, a.iters, [&] {
        if (cs.prologue) apply();
        execute(h, *conv.plan, *conv.pack);
        stats32();
    });
    // The reference outputs, computed last and left in yu, sabs.
    if (cs.prologue) apply();
    execute(h, *conv.plan, *conv.pack);
    execute(h, *conv.plan, *conv_abs.pack);
    CU(cudaStreamSynchronize(st));

    const double floor_apply = cs.prologue ? 4.0 * ein / (a.peak_tbs * 1e12) * 1e3 : 0.0;  // read x, write a
    const double floor_stats = 2.0 * eout / (a.peak_tbs * 1e12) * 1e3;                     // read y

    if (fs.plans.empty())
        return unsupported(cs, dtname, a.n, fs,
                           fmt("%.3f | %.3f (%.3f) | %.3f (%.3f) | %.3f | – | – | – | – | –", t_conv, t_apply,
                               floor_apply, t_stats, floor_stats, t_seq),
                           fmt("\"conv_ms\":%.4f,\"apply_ms\":%.4f,\"stats_ms\":%.4f,\"unfused_seq_ms\":%.4f", t_conv,
                               t_apply, t_stats, t_seq));
    std::vector<int64_t> fuids = {U_X, U_W, U_Y, U_SUM, U_SQ};
    std::vector<void*> fptrs = {x.p, w.p, yf.p, sum.p, sq.p};
    if (cs.prologue) {
        fuids.insert(fuids.end(), {U_S, U_B});
        fptrs.insert(fptrs.end(), {s.p, b.p});
    }
    Timed fused;
    if (!fastest_or_row(h, st, a, fb, "fused ConvBNfprop", fuids, fptrs, ws, fused, row, cs.name, dtname)) return row;
    // Does GenStats overwrite or accumulate? Zero, run, read; run again, read.
    std::vector<float> s1(K), q1(K), s2(K), q2(K);
    CU(cudaMemsetAsync(sum.p, 0, K * 4, st));
    CU(cudaMemsetAsync(sq.p, 0, K * 4, st));
    execute(h, *fused.plan, *fused.pack);
    CU(cudaMemcpyAsync(s1.data(), sum.p, K * 4, cudaMemcpyDeviceToHost, st));
    CU(cudaMemcpyAsync(q1.data(), sq.p, K * 4, cudaMemcpyDeviceToHost, st));
    execute(h, *fused.plan, *fused.pack);
    CU(cudaMemcpyAsync(s2.data(), sum.p, K * 4, cudaMemcpyDeviceToHost, st));
    CU(cudaMemcpyAsync(q2.data(), sq.p, K * 4, cudaMemcpyDeviceToHost, st));
    CU(cudaStreamSynchronize(st));
    double r_sq = 0;
    for (int64_t k = 0; k < K; k++) r_sq += q2[k] / (q1[k] + 1e-30) / K;
    const char* accumulates = r_sq > 1.5 ? "accumulates" : "overwrites";

    // float64 statistics of Yf and of S (the negative control).
    auto stats64 = [&](const void* y, std::vector<double>& s64, std::vector<double>& q64, std::vector<double>& a64) {
        CU(cudaMemsetAsync(d64.p, 0, 3 * K * 8, st));
        double* d = (double*)d64.p;
        channel_stats<T, double><<<stat_blocks, 256, 0, st>>>((const T*)y, rows, (int)K, d, d + K, d + 2 * K);
        CU(cudaGetLastError());
        s64.resize(K);
        q64.resize(K);
        a64.resize(K);
        CU(cudaMemcpyAsync(s64.data(), d, K * 8, cudaMemcpyDeviceToHost, st));
        CU(cudaMemcpyAsync(q64.data(), d + K, K * 8, cudaMemcpyDeviceToHost, st));
        CU(cudaMemcpyAsync(a64.data(), d + 2 * K, K * 8, cudaMemcpyDeviceToHost, st));
        CU(cudaStreamSynchronize(st));
    };
    std::vector<double> fs64, fq64, fa64, ns64, nq64, na64;
    stats64(yf.p, fs64, fq64, fa64);
    stats64(sabs.p, ns64, nq64, na64);
    StatsCheck st_ok = check_stats(s1, q1, fs64, fq64, fa64, u);
    StatsCheck st_neg = check_stats(s1, q1, ns64, nq64, na64, u);

    // Elementwise Y checks.
    Buf cnt(8), mx(4);
    auto ycheck = [&](const void* ref, unsigned long long& bad, float& worst) {
        CU(cudaMemsetAsync(cnt.p, 0, 8, st));
        CU(cudaMemsetAsync(mx.p, 0, 4, st));
        check_close<T><<<132 * 8, 256, 0, st>>>((const T*)yf.p, (const T*)ref, (const T*)sabs.p, eout, (float)u,
                                                (float)((cs.prologue ? 2 * u : 0.0) + 2 * terms * std::ldexp(1.0, -24)),
                                                (unsigned long long*)cnt.p, (unsigned int*)mx.p);
        CU(cudaGetLastError());
        unsigned int bits = 0;
        CU(cudaMemcpyAsync(&bad, cnt.p, 8, cudaMemcpyDeviceToHost, st));
        CU(cudaMemcpyAsync(&bits, mx.p, 4, cudaMemcpyDeviceToHost, st));
        CU(cudaStreamSynchronize(st));
        std::memcpy(&worst, &bits, 4);
    };
    unsigned long long ybad = 0, nbad = 0;
    float yworst = 0, nworst = 0;
    ycheck(yu.p, ybad, yworst);
    ycheck(sabs.p, nbad, nworst);

    bool y_pass = ybad == 0, s_pass = st_ok.bad_channels == 0;
    bool neg_pass = nbad > 0 && st_neg.bad_channels > 0;  // the controls must fail the bounds
    row.failed = !(y_pass && s_pass && neg_pass);
    double saved_seq = t_seq - fused.ms;
    double saved_floor = t_conv + floor_apply + floor_stats - fused.ms;
    std::snprintf(buf, sizeof buf,
                  "| %s | %s | %s | engine %lld (%s, heuristic %s) | %.3f | %.3f | %.3f (%.3f) | %.3f (%.3f) | %.3f | "
                  "%+.3f | %+.3f | %s (%llu of %zu over, worst %.2f of bound) | %s (%d of %lld channels over, worst %.2f; "
                  "GenStats %s) | %s (%llu elements, %d channels) |",
                  cs.name, dtname, found(fs).c_str(), (long long)fused.plan->engine,
                  fused.plan->runtime_compiled ? "runtime-compiled" : "pre-compiled", fused.plan->mode.c_str(),
                  fused.ms, t_conv, t_apply, floor_apply, t_stats, floor_stats, t_seq, saved_seq, saved_floor,
                  y_pass ? "ok" : "**FAIL**", ybad, eout, yworst, s_pass ? "ok" : "**FAIL**", st_ok.bad_channels,
                  (long long)K, st_ok.worst, accumulates, neg_pass ? "fails as it must" : "**DID NOT FAIL**", nbad,
                  st_neg.bad_channels);
    row.line = buf;
    std::snprintf(buf, sizeof buf,
                  "{\"case\":\"%s\",\"dtype\":\"%s\",\"n\":%d,\"fused_supported\":true,\"engine\":%lld,"
                  "\"runtime_compiled\":%s,\"genstats_prec\":\"%s\",\"fused_ms\":%.4f,\"conv_ms\":%.4f,"
                  "\"apply_ms\":%.4f,\"apply_floor_ms\":%.4f,\"stats_ms\":%.4f,\"stats_floor_ms\":%.4f,"
                  "\"unfused_seq_ms\":%.4f,\"saved_vs_seq_ms\":%.4f,\"saved_vs_floor_ms\":%.4f,\"y_ok\":%s,"
                  "\"y_worst\":%.4g,\"stats_ok\":%s,\"stats_worst\":%.4g,\"controls_fail\":%s,\"genstats\":\"%s\"}",
                  cs.name, dtname, a.n, (long long)fused.plan->engine, fused.plan->runtime_compiled ? "true" : "false",
                  fb.variant.c_str(), fused.ms, t_conv, t_apply, floor_apply, t_stats, floor_stats, t_seq, saved_seq,
                  saved_floor, y_pass ? "true" : "false", yworst, s_pass ? "true" : "false", st_ok.worst,
                  neg_pass ? "true" : "false", accumulates);
    row.json = buf;
    return row;
}

}  // namespace

int main(int argc, char** argv) {
    Args a = parse(argc, argv);
    int dev = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        std::fprintf(stderr, "cudnn_fusion_probe: no CUDA device\n");
        return 2;
    }
    for (auto& cs : kCases)
        if ((cs.kind == Case::FPROP && 256 % cs.k != 0) || (cs.kind == Case::DGRAD && 256 % cs.c != 0) ||
            cs.c % 8 != 0) {
            std::fprintf(stderr, "cudnn_fusion_probe: case %s: the reduced channels must divide 256, C be a multiple of 8\n",
                         cs.name);
            return 2;
        }
    cudnnHandle_t h;
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    try {
        CK(cudnnCreate(&h));
        CK(cudnnSetStream(h, st));
    } catch (const CudnnError& e) {
        std::fprintf(stderr, "cudnn_fusion_probe: %s\n", e.what());
        return 2;
    }
    std::printf("## cuDNN ConvBNfprop / ConvBNwgrad / DgradDreluBNBwdWeight probe: %s (sm_%d%d), cuDNN %zu (headers %d), micro-batch %d, "
                "median of %d after %d warm-up runs\n\n",
                prop.name, prop.major, prop.minor, cudnnGetVersion(), CUDNN_VERSION, a.n, a.iters, a.warmup);
    bool failed = false;
    std::vector<std::string> json;
    for (Case::Kind kind : {Case::FPROP, Case::WGRAD, Case::DGRAD}) {
        if (kind == Case::FPROP)
            std::printf("### ConvBNfprop\n\nTimes in ms (CUDA events). Floors: the unfused pass's bytes at %.2f TB/s "
                        "(apply: read x, write a; statistics: read y). Saved: the unfused sequence measured here, and "
                        "conv + both floors (the engine's batch-norm kernels at 100%% of the memory's speed), less the "
                        "fused graph.\n\n| case | type | fused engine configs | fused engine | fused | conv | apply "
                        "(floor) | statistics (floor) | unfused sequence | saved vs sequence | saved vs conv + floors | "
                        "Y check | statistics check | negative controls |\n"
                        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                        a.peak_tbs);
        else if (kind == Case::DGRAD)
            std::printf("\n### DgradDreluBNBwdWeight\n\nTimes in ms. Unfused: the plain data gradient, then the "
                        "probe's dReLU + backward reduction pass (floor: read the gradient and x at %.2f TB/s). Saved: "
                        "plain + the reduction's floor, less the fused graph. Coefficients: largest relative difference "
                        "from the textbook batch-norm backward (information, not a check).\n\n| case | type | fused "
                        "engine configs | fused engine | fused | plain dgrad | reduction (floor) | saved vs plain + floor "
                        "| g check | dscale/dbias check | negative controls | coefficients |\n"
                        "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                        a.peak_tbs);
        else
            std::printf("\n### ConvBNwgrad\n\nTimes in ms. Extra: the fused weight gradient less the plain one (what "
                        "recomputing the activation costs the backward); the forward apply it makes unnecessary beside "
                        "it (measured, and its floor at %.2f TB/s).\n\n| case | type | fused engine configs | fused "
                        "engine | fused | plain | extra | forward apply saved (floor) | dW check | reference self-check "
                        "(plain dW) | negative control |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
                        a.peak_tbs);
        std::fflush(stdout);
        for (auto& cs : kCases) {
            if (cs.kind != kind) continue;
            if (!a.cases.empty() && std::find(a.cases.begin(), a.cases.end(), cs.name) == a.cases.end()) continue;
            for (auto& d : a.dtypes) {
                bool half = d == "half";
                const char* name = half ? "fp16" : "bf16";
                double u = std::ldexp(1.0, half ? -11 : -8);
                Row r;
                try {
                    if (kind == Case::FPROP)
                        r = half ? run_fprop<__half>(cs, name, CUDNN_DATA_HALF, u, a, h, st)
                                 : run_fprop<__nv_bfloat16>(cs, name, CUDNN_DATA_BFLOAT16, u, a, h, st);
                    else if (kind == Case::DGRAD)
                        r = half ? run_dgrad<__half>(cs, name, CUDNN_DATA_HALF, u, a, h, st)
                                 : run_dgrad<__nv_bfloat16>(cs, name, CUDNN_DATA_BFLOAT16, u, a, h, st);
                    else
                        r = half ? run_wgrad<__half>(cs, name, CUDNN_DATA_HALF, u, a, h, st)
                                 : run_wgrad<__nv_bfloat16>(cs, name, CUDNN_DATA_BFLOAT16, u, a, h, st);
                } catch (const CudnnError& e) {  // a call outside the plan search failed: report, go on
                    r.line = std::string("| ") + cs.name + " | " + name + " | – | **error**: " + clip(e.what()) + " |";
                    r.failed = true;
                }
                std::printf("%s\n", r.line.c_str());
                std::fflush(stdout);
                if (!r.json.empty()) json.push_back(r.json);
                failed |= r.failed;
            }
        }
    }
    std::printf("\n");
    for (auto& j : json) std::printf("RESULT %s\n", j.c_str());
    cudnnDestroy(h);
    cudaStreamDestroy(st);
    return failed ? 1 : 0;
}
