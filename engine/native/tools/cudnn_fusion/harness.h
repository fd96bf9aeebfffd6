// harness.h: what every case of the probe shares (probe.cu, wgrad.cuh): flags, CUDA-event
// timing, device buffers, the engine-config search and the fastest plan, the result row.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "cudnn_fusion_graph.h"  // engine/native/src: the engine's copy (build.sh: -I)
#include "kernels.cuh"

namespace probe {
using namespace ::cs::cudnnfe;

inline void cu(cudaError_t e, const char* what, int line) {
    if (e == cudaSuccess) return;
    std::fprintf(stderr, "cudnn_fusion_probe: %s (line %d): %s\n", what, line, cudaGetErrorString(e));
    std::exit(2);
}
#define CU(x) cu((x), #x, __LINE__)

struct Args {
    int n = 384, iters = 30, warmup = 5, max_plans = 6;
    double peak_tbs = 3.35;
    std::vector<std::string> dtypes{"half", "bf16"};
    std::vector<std::string> cases;  // empty: all
};

// One probed layer: C input channels, K output channels, HW x HW pixels, R x R filter.
struct Case {
    enum Kind { FPROP, WGRAD, DGRAD } kind;
    const char* name;
    int64_t c, k, hw, r;
    bool prologue;  // fprop: scale-bias-ReLU on the input (else conv + GenStats only)
    const char* layer;
};

// A case's sizes at micro-batch a.n: rows = N H W pixels; ein, eout, ew the elements of the
// convolution's input [N, C], output [N, K] and filter [K, R, R, C]. Announces the case on stderr.
struct Shape {
    int64_t N, C, K, HW, R, pad, rows;
    size_t ein, eout, ew;
    Shape(const Case& cs, const Args& a, const char* dtname)
        : N(a.n), C(cs.c), K(cs.k), HW(cs.hw), R(cs.r), pad((cs.r - 1) / 2), rows(N * HW * HW),
          ein((size_t)(rows * C)), eout((size_t)(rows * K)), ew((size_t)(K * C * R * R)) {
        std::fprintf(stderr, "%s %s (%s), N=%lld\n", cs.name, dtname, cs.layer, (long long)N);
    }
};

inline double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Median ms of f() over iters runs after warmup runs, CUDA events on stream st.
template <class F>
double time_ms(cudaStream_t st, int warmup, int iters, F f) {
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    for (int i = 0; i < warmup; i++) f();
    CU(cudaStreamSynchronize(st));
    std::vector<float> ms;
    for (int i = 0; i < iters; i++) {
        CU(cudaEventRecord(a, st));
        f();
        CU(cudaEventRecord(b, st));
        CU(cudaEventSynchronize(b));
        float t = 0;
        CU(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
    return median(ms);
}

struct Buf {
    void* p = nullptr;
    explicit Buf(size_t bytes) { CU(cudaMalloc(&p, bytes < 16 ? 16 : bytes)); }
    ~Buf() { cudaFree(p); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
};

// uids of the graphs' tensors
enum : int64_t { U_X = 1, U_S, U_B, U_W, U_Y, U_SUM, U_SQ, V_SCALED = 100 };

// Plans for g: heuristics mode A, FALLBACK if A gives none that finalizes; at most max_plans.
struct Search {
    std::vector<std::shared_ptr<Plan>> plans;
    int proposed = 0, tried = 0;
    std::string refusal;
};
inline Search find_plans(const Graph& g, int max_plans) {
    Search s;
    for (auto mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        std::vector<DescP> cfgs;
        try {
            cfgs = engine_configs(g, mode);
        } catch (const CudnnError& e) {
            if (s.refusal.empty()) s.refusal = e.what();
            continue;
        }
        s.proposed += (int)cfgs.size();
        for (auto& cfg : cfgs) {
            if ((int)s.plans.size() >= max_plans || s.tried >= 4 * max_plans) break;
            s.tried++;
            std::string why;
            auto t0 = std::chrono::steady_clock::now();
            auto p = make_plan(g, cfg, &why);
            double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (sec > 1.0) std::fprintf(stderr, "  a plan took %.1f s to finalize (%s)\n", sec, p ? "ok" : "refused");
            if (p) {
                p->mode = mode == CUDNN_HEUR_MODE_A ? "A" : "fallback";
                s.plans.push_back(p);
            } else if (s.refusal.empty()) {
                s.refusal = why;
            }
        }
        if (!s.plans.empty()) break;
    }
    return s;
}

struct Timed {
    std::shared_ptr<Plan> plan;
    DescP pack;
    double ms = 0;
};

// Times every plan with its own pack (ptrs in uid order) and keeps the fastest.
inline Timed fastest(cudnnHandle_t h, cudaStream_t st, const Args& a, const Search& s,
                     const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
                     std::vector<std::shared_ptr<Buf>>& workspaces) {
    Timed best;
    for (auto& p : s.plans) {
        if (p->workspace > (int64_t(4) << 30)) {  // not an engine a training step would use
            std::fprintf(stderr, "  engine %lld skipped: asks %lld B of workspace\n", (long long)p->engine,
                         (long long)p->workspace);
            continue;
        }
        workspaces.push_back(std::make_shared<Buf>((size_t)p->workspace));
        auto pack = variant_pack(uids, ptrs, workspaces.back()->p);
        double ms;
        try {
            ms = time_ms(st, a.warmup, a.iters, [&] { execute(h, *p, *pack); });
        } catch (const CudnnError& e) {
            std::fprintf(stderr, "  engine %lld failed to run: %s\n", (long long)p->engine, e.what());
            continue;
        }
        std::fprintf(stderr, "  engine %lld (%s%s, heuristic %s, workspace %lld B): %.3f ms\n", (long long)p->engine,
                     p->runtime_compiled ? "runtime-compiled" : "pre-compiled", p->tensor_core ? ", tensor cores" : "",
                     p->mode.c_str(), (long long)p->workspace, ms);
        if (!best.plan || ms < best.ms) best = {p, pack, ms};
    }
    return best;
}

template <typename T>
void launch_fill(T* p, size_t n, uint64_t seed, float lo, float hi, bool relu, cudaStream_t st) {
    fill<T><<<1024, 256, 0, st>>>(p, n, seed, lo, hi, relu ? 1 : 0);
    CU(cudaGetLastError());
}

struct StatsCheck {
    int bad_channels = 0;
    double worst = 0;  // largest |error| / bound over channels and both statistics
};
inline StatsCheck check_stats(const std::vector<float>& sum, const std::vector<float>& sq,
                              const std::vector<double>& sum64, const std::vector<double>& sq64,
                              const std::vector<double>& abs64, double u) {
    StatsCheck r;
    for (size_t k = 0; k < sum.size(); k++) {
        double b1 = 2 * u * abs64[k] + 1e-300, b2 = 4 * u * sq64[k] + 1e-300;
        double e1 = std::fabs(sum[k] - sum64[k]) / b1, e2 = std::fabs(sq[k] - sq64[k]) / b2;
        if (!(e1 <= 1) || !(e2 <= 1)) r.bad_channels++;
        double w = std::max(e1, e2);
        r.worst = std::isnan(w) ? INFINITY : std::max(r.worst, w);
    }
    return r;
}

// One line of a table cell: cuDNN's messages can be long.
inline std::string clip(std::string s) {
    for (auto& ch : s)
        if (ch == '|' || ch == '\n') ch = ' ';
    return s.size() > 240 ? s.substr(0, 240) + "..." : s;
}

struct Row {
    std::string line, json;
    bool failed = false;
};

// A graph built by build(graph, type) for each type in turn (an intermediate type or a math
// precision an engine may insist on) until one yields plans. The graph lives as long as this.
struct Built {
    Search search;
    std::unique_ptr<Graph> graph;
    std::string variant;  // the type that yielded plans (or the last tried)
};
template <class F>
Built build_and_search(cudnnHandle_t h, std::initializer_list<cudnnDataType_t> types, const char* io_name,
                       int max_plans, F build) {
    Built r;
    for (cudnnDataType_t t : types) {
        r.graph.reset(new Graph(h));
        try {
            build(*r.graph, t);
            r.graph->finalize();
            r.search = find_plans(*r.graph, max_plans);
        } catch (const CudnnError& e) {
            r.search = Search();
            r.search.refusal = e.what();
        }
        r.variant = t == CUDNN_DATA_FLOAT ? "fp32" : io_name;
        if (!r.search.plans.empty()) break;
    }
    return r;
}

// The fastest plan of b into out; false (and row says why, as a failure) when none ran. what
// names the graph in the messages ("plain convolution", "fused").
inline bool fastest_or_row(cudnnHandle_t h, cudaStream_t st, const Args& a, const Built& b, const char* what,
                           const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
                           std::vector<std::shared_ptr<Buf>>& ws, Timed& out, Row& row, const char* case_name,
                           const char* dtname) {
    if (!b.search.plans.empty()) {
        std::fprintf(stderr, " %s (%s): %d configs proposed, %zu plans\n", what, b.variant.c_str(),
                     b.search.proposed, b.search.plans.size());
        out = fastest(h, st, a, b.search, uids, ptrs, ws);
    }
    if (out.plan) return true;
    row.line = std::string("| ") + case_name + " | " + dtname + " | – | " + what + ": no plan ran: " +
               clip(b.search.refusal) + " |";
    row.failed = true;
    return false;
}

// The plain (one-op) convolution of a case's kind, the unfused reference: uid 1 and 2 its
// inputs, 3 its output (fprop: X, W -> Y; wgrad: X, dY -> dW; dgrad: dY, W -> dX).
inline Built plain_conv(cudnnHandle_t h, Case::Kind kind, cudnnDataType_t dt, const char* dtname, const Shape& z,
                        int max_plans) {
    return build_and_search(h, {dt}, dtname, max_plans, [&](Graph& g, cudnnDataType_t) {
        if (kind == Case::FPROP)
            g.conv_fwd(g.tensor(1, dt, z.N, z.C, z.HW, z.HW, false), g.tensor(2, dt, z.K, z.C, z.R, z.R, false),
                       g.tensor(3, dt, z.N, z.K, z.HW, z.HW, false), z.pad);
        else if (kind == Case::WGRAD)
            g.conv_wgrad(g.tensor(1, dt, z.N, z.C, z.HW, z.HW, false), g.tensor(2, dt, z.N, z.K, z.HW, z.HW, false),
                         g.tensor(3, dt, z.K, z.C, z.R, z.R, false), z.pad);
        else
            g.conv_dgrad(g.tensor(1, dt, z.N, z.K, z.HW, z.HW, false), g.tensor(2, dt, z.K, z.C, z.R, z.R, false),
                         g.tensor(3, dt, z.N, z.C, z.HW, z.HW, false), z.pad);
    });
}

// "N proposed, M finalized" of a search, for the table.
inline std::string found(const Search& s) {
    return std::to_string(s.proposed) + " proposed, " + std::to_string(s.plans.size()) + " finalized";
}

// printf into a string (table cells, JSON fields).
template <class... V>
std::string fmt(const char* f, V... v) {
    char buf[2048];
    std::snprintf(buf, sizeof buf, f, v...);
    return buf;
}

// The row of a fused pattern no engine took: cuDNN's refusal, then the unfused side's cells and
// JSON fields as the caller measured them.
inline Row unsupported(const Case& cs, const char* dtname, int n, const Search& fs, const std::string& cells,
                       const std::string& json) {
    Row r;
    r.line = fmt("| %s | %s | %s | **not supported**: %s | – | %s |", cs.name, dtname, found(fs).c_str(),
                 clip(fs.refusal).c_str(), cells.c_str());
    r.json = fmt("{\"case\":\"%s\",\"dtype\":\"%s\",\"n\":%d,\"fused_supported\":false,%s}", cs.name, dtname, n,
                 json.c_str());
    return r;
}


}  // namespace probe
