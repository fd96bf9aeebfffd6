// cudnn_fusion_graph.h: a thin layer over cuDNN's backend (graph) C API (cudnn_graph.h,
// cuDNN 9): the one copy of it, used by the engine's fused ResNet path (resnet_fusion.cpp,
// built only where CMake finds cuDNN's backend headers: CS_WITH_CUDNN_FUSION) and by the
// standalone probe (tools/cudnn_fusion/, docs/resnet-fusion.md section 4). Header-only, no
// torch: the probe compiles it with nvcc alone.
//
// The calls, in the order the backend wants them (docs.nvidia.com/cudnn, "Graph API" and the
// backend descriptor reference):
//   cudnnBackendCreateDescriptor(type)        one per tensor, op, graph, heuristic, plan, pack
//   cudnnBackendSetAttribute(desc, name, ...)  its attributes
//   cudnnBackendFinalize(desc)                 validates; a plan's finalize is where an engine
//                                              config says "not supported" for this graph
//   CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR   the ops + the handle
//   CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR       mode A/B/FALLBACK -> engine configs (RESULTS)
//   CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR   handle + one engine config
//   CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR     tensor uids -> device pointers, workspace
//   cudnnBackendExecute(handle, plan, pack)
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cs {
namespace cudnnfe {

struct CudnnError : std::runtime_error {
    cudnnStatus_t status;
    CudnnError(const std::string& what, cudnnStatus_t s) : std::runtime_error(what), status(s) {}
};

inline void check(cudnnStatus_t s, const char* what, int line) {
    if (s == CUDNN_STATUS_SUCCESS) return;
    char last[512] = {0};
    cudnnGetLastErrorString(last, sizeof last);
    throw CudnnError(std::string(what) + " (line " + std::to_string(line) + "): " + cudnnGetErrorString(s) +
                         (last[0] ? std::string(" [") + last + "]" : std::string()),
                     s);
}
#define CK(x) ::cs::cudnnfe::check((x), #x, __LINE__)

// One backend descriptor, destroyed with its owner.
class Desc {
   public:
    explicit Desc(cudnnBackendDescriptorType_t t) { CK(cudnnBackendCreateDescriptor(t, &d_)); }
    ~Desc() {
        if (d_) cudnnBackendDestroyDescriptor(d_);
    }
    Desc(const Desc&) = delete;
    Desc& operator=(const Desc&) = delete;
    cudnnBackendDescriptor_t get() const { return d_; }
    cudnnBackendDescriptor_t* ptr() { return &d_; }
    template <typename T>
    void set(cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t, int64_t count, const T* v) {
        CK(cudnnBackendSetAttribute(d_, n, t, count, v));
    }
    void set_desc(cudnnBackendAttributeName_t n, const Desc& other) {
        cudnnBackendDescriptor_t o = other.get();
        CK(cudnnBackendSetAttribute(d_, n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o));
    }
    void finalize() { CK(cudnnBackendFinalize(d_)); }

   private:
    cudnnBackendDescriptor_t d_ = nullptr;
};
using DescP = std::shared_ptr<Desc>;

// A graph under construction: keeps every descriptor alive for the graph's lifetime.
class Graph {
   public:
    explicit Graph(cudnnHandle_t h) : handle_(h) {}

    // NHWC-packed 4-d tensor; dims in cuDNN's order [N, C, H, W] (filters [K, C, R, S], KRSC).
    const Desc& tensor(int64_t uid, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w,
                       bool is_virtual) {
        auto t = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        int64_t dims[4] = {n, c, h, w};
        int64_t strides[4] = {c * h * w, 1, w * c, c};
        int64_t align = 16;
        bool virt = is_virtual;
        t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
        t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
        t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
        t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
        t->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
        t->finalize();
        return *t;
    }

    // y = x (op) b, or y = op(x) when b is null (ReLU).
    void pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y) {
        auto pw = pw_desc(mode);
        auto op = keep(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw);
        op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
        if (b) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
        op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
        op->finalize();
        ops_.push_back(op->get());
    }

    // The batch norm's apply as a prologue, ReLU(x * s + b): s, b [1, C, 1, 1] of type dt (uids
    // uid_s, uid_s + 1), the three results [n, c, h, w] virtual of type inter (uids uid_v ...
    // uid_v + 2). Returns the ReLU's output.
    const Desc& scale_bias_relu(const Desc& x, int64_t uid_s, int64_t uid_v, cudnnDataType_t dt,
                                cudnnDataType_t inter, int64_t n, int64_t c, int64_t h, int64_t w) {
        auto& s = tensor(uid_s, dt, 1, c, 1, 1, false);
        auto& b = tensor(uid_s + 1, dt, 1, c, 1, 1, false);
        auto& v1 = tensor(uid_v, inter, n, c, h, w, true);
        auto& v2 = tensor(uid_v + 1, inter, n, c, h, w, true);
        auto& v3 = tensor(uid_v + 2, inter, n, c, h, w, true);
        pointwise(CUDNN_POINTWISE_MUL, x, &s, v1);
        pointwise(CUDNN_POINTWISE_ADD, v1, &b, v2);
        pointwise(CUDNN_POINTWISE_RELU_FWD, v2, nullptr, v3);
        return v3;
    }

    // Cross-correlation, fp32 compute, symmetric padding, unit dilation, the given stride.
    void conv_fwd(const Desc& x, const Desc& w, const Desc& y, int64_t pad, int64_t stride = 1) {
        conv_op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                {{CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, &x}, {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, &w},
                 {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, &y}},
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, pad, stride);
    }

    // The weight gradient of the same convolution: dw = sum over pixels of x (shifted) * dy.
    void conv_wgrad(const Desc& x, const Desc& dy, const Desc& dw, int64_t pad, int64_t stride = 1) {
        conv_op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                {{CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, &x}, {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, &dy},
                 {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, &dw}},
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, pad, stride);
    }

    // The data gradient of the same convolution: dx = dy convolved back with W.
    void conv_dgrad(const Desc& dy, const Desc& w, const Desc& dx, int64_t pad) {
        conv_op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                {{CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, &dy}, {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, &w},
                 {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, &dx}},
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, pad);
    }

    // An activation's backward (RELU_BWD): dx = dy where the forward input x > 0, else 0.
    void pointwise_bwd(cudnnPointwiseMode_t mode, const Desc& dy, const Desc& x, const Desc& dx) {
        auto pw = pw_desc(mode);
        auto op = keep(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw);
        op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, dy);
        op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
        op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, dx);
        op->finalize();
        ops_.push_back(op->get());
    }

    // Batch norm's backward weights (DgradDreluBNBwdWeight's last node): dscale, dbias and the
    // coefficients of dx = eq_dy * dy + eq_x * x + eq_bias, from dy, x, mean, inv-std and scale.
    void bn_bwd_weights(const Desc& dy, const Desc& x, const Desc& mean, const Desc& invstd, const Desc& scale,
                        const Desc& dscale, const Desc& dbias, const Desc& eq_dy, const Desc& eq_x,
                        const Desc& eq_bias) {
        auto op = keep(CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR);
        cudnnDataType_t prec = CUDNN_DATA_FLOAT;
        op->set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, x);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, dy);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, mean);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, invstd);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, scale);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, dscale);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, dbias);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, eq_dy);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, eq_x);
        op->set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, eq_bias);
        op->finalize();
        ops_.push_back(op->get());
    }

    // Per-channel sum and sum of squares of x (CUDNN_GENSTATS_SUM_SQSUM).
    void genstats(const Desc& x, const Desc& sum, const Desc& sqsum, cudnnDataType_t math_prec) {
        auto op = keep(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
        cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
        op->set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
        op->set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math_prec);
        op->set_desc(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, x);
        op->set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum);
        op->set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sqsum);
        op->finalize();
        ops_.push_back(op->get());
    }

    // The operation graph; throws (NOT_SUPPORTED...) when cuDNN refuses the pattern outright.
    const Desc& finalize() {
        graph_ = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
        graph_->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops_.size(),
                    ops_.data());
        graph_->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_);
        graph_->finalize();
        return *graph_;
    }
    const Desc& graph() const { return *graph_; }
    cudnnHandle_t handle() const { return handle_; }

   private:
    // One convolution op of the given type: its three tensors, descriptor, alpha 1 and beta 0.
    void conv_op(cudnnBackendDescriptorType_t type,
                 std::initializer_list<std::pair<cudnnBackendAttributeName_t, const Desc*>> tensors,
                 cudnnBackendAttributeName_t conv, cudnnBackendAttributeName_t alpha_name,
                 cudnnBackendAttributeName_t beta_name, int64_t pad, int64_t stride = 1) {
        auto cd = conv_desc(pad, stride);
        auto op = keep(type);
        float alpha = 1.0f, beta = 0.0f;
        for (auto& t : tensors) op->set_desc(t.first, *t.second);
        op->set_desc(conv, *cd);
        op->set(alpha_name, CUDNN_TYPE_FLOAT, 1, &alpha);
        op->set(beta_name, CUDNN_TYPE_FLOAT, 1, &beta);
        op->finalize();
        ops_.push_back(op->get());
    }
    // fp32 math; a ReLU's clips set as NVIDIA's frontend sets them (0, FLT_MAX, slope 0).
    DescP pw_desc(cudnnPointwiseMode_t mode) {
        auto pw = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        cudnnDataType_t prec = CUDNN_DATA_FLOAT;
        pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
        pw->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
        if (mode == CUDNN_POINTWISE_RELU_FWD || mode == CUDNN_POINTWISE_RELU_BWD) {
            double lower = 0.0, upper = 3.4028234663852886e38, slope = 0.0;
            pw->set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &lower);
            pw->set(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &upper);
            pw->set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &slope);
        }
        pw->finalize();
        return pw;
    }
    DescP conv_desc(int64_t pad, int64_t stride) {
        auto cd = keep(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
        cudnnDataType_t comp = CUDNN_DATA_FLOAT;
        cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
        int64_t dims = 2, one[2] = {1, 1}, padv[2] = {pad, pad}, st[2] = {stride, stride};
        cd->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
        cd->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
        cd->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
        cd->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one);
        cd->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, st);
        cd->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padv);
        cd->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padv);
        cd->finalize();
        return cd;
    }
    DescP keep(cudnnBackendDescriptorType_t t) {
        descs_.push_back(std::make_shared<Desc>(t));
        return descs_.back();
    }
    cudnnHandle_t handle_;
    std::vector<DescP> descs_;
    std::vector<cudnnBackendDescriptor_t> ops_;
    DescP graph_;
};

// A finalized execution plan and what the engine behind it says of itself.
struct Plan {
    DescP plan;
    DescP cfg;
    int64_t engine = -1;        // CUDNN_ATTR_ENGINE_GLOBAL_INDEX
    bool runtime_compiled = false;  // CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION
    bool tensor_core = false;   // CUDNN_NUMERICAL_NOTE_TENSOR_CORE
    bool nondeterministic = false;  // CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
    int64_t workspace = 0;
    std::string mode;           // the heuristic that proposed it
};

// Engine configs proposed by a heuristic mode for the finalized graph g.
inline std::vector<DescP> engine_configs(const Graph& g, cudnnBackendHeurMode_t mode) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g.graph());
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    heur.finalize();
    int64_t count = 0;
    CK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                nullptr));
    std::vector<DescP> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; i++) {
        cfgs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
        raw.push_back(cfgs.back()->get());
    }
    int64_t got = 0;
    if (count > 0)
        CK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                    &got, raw.data()));
    cfgs.resize((size_t)got);
    return cfgs;
}

// The plan of one engine config, or null with the reason when the engine refuses the graph.
inline std::shared_ptr<Plan> make_plan(const Graph& g, const DescP& cfg, std::string* why) {
    auto p = std::make_shared<Plan>();
    p->cfg = cfg;
    try {
        p->plan = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        cudnnHandle_t h = g.handle();
        p->plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
        p->plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *cfg);
        p->plan->finalize();
        int64_t n = 0;
        CK(cudnnBackendGetAttribute(p->plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                    &n, &p->workspace));
        Desc eng(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        CK(cudnnBackendGetAttribute(cfg->get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                    eng.ptr()));
        CK(cudnnBackendGetAttribute(eng.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &p->engine));
        cudnnBackendBehaviorNote_t bn[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
        if (cudnnBackendGetAttribute(eng.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                     CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, bn) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < n; i++) p->runtime_compiled |= bn[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
        cudnnBackendNumericalNote_t nn[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        if (cudnnBackendGetAttribute(eng.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, nn) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < n; i++) {
                p->tensor_core |= nn[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
                p->nondeterministic |= nn[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
            }
    } catch (const CudnnError& e) {
        if (why) *why = e.what();
        return nullptr;
    }
    return p;
}

// The variant pack (uids[i] -> ptrs[i], and the workspace), built once and reused by every run.
inline DescP variant_pack(const std::vector<int64_t>& uids, const std::vector<void*>& ptrs, void* workspace) {
    auto pack = std::make_shared<Desc>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack->set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, (int64_t)uids.size(), uids.data());
    pack->set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, (int64_t)ptrs.size(), ptrs.data());
    pack->set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    pack->finalize();
    return pack;
}

// Runs a plan on the handle's stream.
inline void execute(cudnnHandle_t h, const Plan& p, const Desc& pack) {
    CK(cudnnBackendExecute(h, p.plan->get(), pack.get()));
}

}  // namespace cudnnfe
}  // namespace cs
