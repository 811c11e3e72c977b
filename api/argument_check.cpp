// Launch-argument validation: every check runs before any CUDA call, and each failure
// is a UserError naming the argument, what is wrong with it and what to do.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>

#include "attnjit/common/kernel_config.h"
#include "codegen/bounds_check.h"
#include "dsl/printer.h"
#include "api/attention.h"
#include "api/attention_backward.h"
#include "support/error.h"

namespace attnjit {
namespace {

std::string shape_str(const std::vector<int64_t>& v) {
    std::ostringstream s;
    s << "[";
    for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
    s << "]";
    return s.str();
}

// Structure common to every tensor argument: data, rank, strides.
void check_view(const std::string& name, const TensorView& t, int rank) {
    user_check(t.data != nullptr) << "argument '" << name << "' has a null data pointer; pass device memory";
    user_check(static_cast<int>(t.shape.size()) == rank)
        << "argument '" << name << "' has rank " << t.shape.size() << " (shape " << shape_str(t.shape)
        << "); it must have rank " << rank;
    user_check(t.strides.size() == t.shape.size())
        << "argument '" << name << "' has " << t.strides.size() << " strides for rank " << t.shape.size()
        << "; give one stride (in elements) per dimension";
    for (int d = 0; d < rank; ++d) {
        user_check(t.shape[d] >= 0) << "argument '" << name << "' has a negative size in shape "
                                    << shape_str(t.shape);
        user_check(t.strides[d] >= 0) << "argument '" << name << "' has negative stride " << t.strides[d]
                                      << " in dimension " << d << "; flip the tensor into a copy first";
    }
}

// Q, K, V, O: the spec's dtype, unit stride and 16-byte alignment for vector loads.
void check_qkvo(const std::string& name, const TensorView& t, DType dtype) {
    check_view(name, t, 4);
    user_check(t.dtype == dtype) << "argument '" << name << "' has dtype " << dtype_name(t.dtype)
                                 << " but the spec was compiled for " << dtype_name(dtype)
                                 << "; convert the tensor or build a spec with .dtype(" << dtype_name(t.dtype)
                                 << ")";
    user_check(t.strides[3] == 1)
        << "argument '" << name << "' has stride " << t.strides[3]
        << " on the head dimension; it must be 1 (other dimensions may have any stride)";
    const int esize = dtype_size(dtype);
    user_check(reinterpret_cast<uintptr_t>(t.data) % 16 == 0)
        << "argument '" << name << "' points to " << t.data
        << ", which is not 16-byte aligned; attnjit loads 16 bytes at a time, so pass an aligned "
           "allocation (a fresh or contiguous tensor)";
    for (int d = 0; d < 3; ++d)
        user_check((t.strides[d] * esize) % 16 == 0 || t.shape[d] == 1)
            << "argument '" << name << "' has stride " << t.strides[d] << " in dimension " << d << " ("
            << t.strides[d] * esize << " bytes); strides must be multiples of 16 bytes so rows stay "
            << "aligned: make the tensor contiguous or pad the head dimension";
}

// Each captured tensor: present, right dtype/rank, and large enough for every index the
// expressions can produce (a dimension of stride 0 broadcasts and may be of size 1).
void check_captured(const SpecInputs& in, const LaunchArgs& a, const codegen::LaunchExtents& x) {
    const auto& wanted = in.tensors;
    for (const auto& [name, view] : a.tensors)
        user_check(wanted.count(name)) << "argument tensors['" << name << "'] is not read by the spec"
                                       << (wanted.empty() ? " (the spec captures no tensors)" : "")
                                       << "; remove it or check the name";
    for (const auto& [name, info] : wanted) {
        auto it = a.tensors.find(name);
        user_check(it != a.tensors.end()) << "the spec reads tensor '" << name << "' (" << dtype_name(info.dtype)
                                          << ", rank " << info.rank << ") but args.tensors has no entry '"
                                          << name << "'; pass it by that name";
        const TensorView& t = it->second;
        check_view(name, t, info.rank);
        user_check(t.dtype == info.dtype) << "tensor '" << name << "' has dtype " << dtype_name(t.dtype)
                                          << " but the spec declared " << dtype_name(info.dtype);
        user_check(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0)
            << "tensor '" << name << "' is not aligned to its element size";
    }
    // Bounds: no read of any captured tensor can leave it (codegen/bounds_analysis.h).
    codegen::LaunchNumbers numbers{x, a.scalars, {}};
    for (const auto& [name, t] : a.tensors) numbers.tensors[name] = codegen::TensorExtent{t.shape, t.strides};
    codegen::check_tensor_reads(in.tensor_reads, numbers);
}

void check_scalars(const SpecInputs& in, const LaunchArgs& a) {
    const auto& wanted = in.scalars;
    for (const auto& [name, value] : a.scalars)
        user_check(wanted.count(name)) << "argument scalars['" << name << "'] is not read by the spec"
                                       << (wanted.empty() ? " (the spec has no runtime scalars)" : "")
                                       << "; remove it or check the name";
    for (const auto& [name, type] : wanted) {
        auto it = a.scalars.find(name);
        user_check(it != a.scalars.end()) << "the spec reads scalar '" << name << "' (" << dsl::type_name(type)
                                          << ") but args.scalars has no entry '" << name << "'; pass its value";
        double v = it->second;
        user_check(!std::isnan(v)) << "scalar '" << name << "' is NaN";
        if (type == dsl::Type::Int)
            user_check(v == std::floor(v) && std::fabs(v) <= std::numeric_limits<int32_t>::max())
                << "scalar '" << name << "' is an int scalar but got " << v << "; pass a whole number that fits in int32";
    }
}

// The latent projections [Hq, Dqk, L] and [Hq, L, Dv]: copied 16 bytes at a time by rows
// (sm80/latent.cuh), so columns contiguous and rows and heads 16-byte aligned.
void check_latent_weights(const AttentionSpec& spec, const LaunchArgs& a, int64_t hq) {
    const int64_t L = spec.latent_dim();
    const struct {
        const std::string& name;
        const char* what;
        std::vector<int64_t> shape;
    } weights[] = {{spec.latent_w_qlat(), "w_qlat", {hq, spec.head_dim_qk(), L}},
                   {spec.latent_w_vup(), "w_vup", {hq, L, spec.head_dim_v()}}};
    for (const auto& w : weights) {
        const TensorView& t = a.tensors.at(w.name);
        user_check(t.shape == w.shape) << "the latent projection's " << w.what << " '" << w.name << "' has shape "
                                       << shape_str(t.shape) << " but must be " << shape_str(w.shape)
                                       << (w.shape[1] == L ? " [Hq, L, Dv]" : " [Hq, Dqk, L]");
        const size_t es = dtype_size(t.dtype);
        user_check(t.strides[2] == 1 && reinterpret_cast<uintptr_t>(t.data) % 16 == 0 &&
                   (t.strides[1] * es) % 16 == 0 && ((t.strides[0] * es) % 16 == 0 || t.shape[0] == 1))
            << "the latent projection's " << w.what << " '" << w.name << "' (strides " << shape_str(t.strides)
            << ") must have contiguous rows starting on 16-byte boundaries (it is copied 16 bytes at a time); "
               "pass a contiguous tensor";
    }
}

}  // namespace

void check_launch_args(const AttentionSpec& spec, const LaunchArgs& a) {
    check_launch_args(spec, spec_inputs(spec), a);
}

void check_launch_args(const AttentionSpec& spec, const SpecInputs& in, const LaunchArgs& a) {
    const DType dt = spec.dtype();
    check_qkvo("q", a.q, dt);
    check_qkvo("k", a.k, dt);
    check_qkvo("v", a.v, dt);
    check_qkvo("o", a.o, dt);
    const auto &q = a.q.shape, &k = a.k.shape, &v = a.v.shape, &o = a.o.shape;
    const int dqk = spec.head_dim_qk(), dv = spec.head_dim_v();
    // With a latent projection K and V are the latent tensors [B, 1, Nk, L].
    const int dk = spec.has_latent() ? spec.latent_dim() : dqk, dvk = spec.has_latent() ? spec.latent_dim() : dv;
    const char* latent = spec.has_latent() ? " (the latent dim L: K and V are the latent tensors)" : "";
    user_check(q[3] == dqk) << "argument 'q' has head dim " << q[3] << " (shape " << shape_str(q)
                            << ") but the spec was compiled for Dqk = " << dqk;
    user_check(k[3] == dk) << "argument 'k' has head dim " << k[3] << " (shape " << shape_str(k)
                           << ") but the spec was compiled for " << dk << latent;
    user_check(v[3] == dvk) << "argument 'v' has head dim " << v[3] << " (shape " << shape_str(v)
                            << ") but the spec was compiled for " << dvk << latent;
    user_check(!spec.has_latent() || k[1] == 1)
        << "argument 'k' has " << k[1] << " heads (shape " << shape_str(k)
        << ") but a latent projection's K and V are shared by every query head: pass [B, 1, Nk, L]";
    user_check(k[0] == q[0] && v[0] == q[0] && o[0] == q[0])
        << "batch sizes differ: q " << shape_str(q) << ", k " << shape_str(k) << ", v " << shape_str(v)
        << ", o " << shape_str(o) << "; dimension 0 must agree";
    user_check(v[1] == k[1] && v[2] == k[2]) << "arguments 'k' " << shape_str(k) << " and 'v' " << shape_str(v)
                                             << " must have the same number of heads and the same length";
    user_check(k[1] >= 1 && q[1] >= 1) << "arguments 'q' " << shape_str(q) << " and 'k' " << shape_str(k)
                                       << " must have at least one head";
    user_check(q[1] % k[1] == 0) << "argument 'q' has " << q[1] << " heads and 'k' has " << k[1]
                                 << "; query heads must be a multiple of key/value heads (GQA)";
    if (spec.q_heads() > 0)
        user_check(q[1] == spec.q_heads() && k[1] == spec.kv_heads())
            << "arguments have " << q[1] << " query and " << k[1] << " key/value heads but the spec says "
            << spec.q_heads() << " and " << spec.kv_heads();
    user_check(o[1] == q[1] && o[2] == q[2] && o[3] == dv)
        << "argument 'o' has shape " << shape_str(o) << " but must be [" << q[0] << ", " << q[1] << ", " << q[2]
        << ", " << dv << "] (B, Hq, Nq, Dv)";
    user_check(k[2] >= 1 || q[2] == 0 || q[0] == 0)
        << "argument 'k' has length 0; attention needs at least one key";
    const bool empty = q[0] == 0 || q[1] == 0 || q[2] == 0;  // nothing is written
    for (int d = 0; d < 3 && !empty; ++d)
        user_check(a.o.strides[d] != 0 || o[d] <= 1)
            << "argument 'o' has stride 0 in dimension " << d << "; outputs must not overlap";
    user_check(q[1] <= 65535 && q[0] <= 65535)
        << "arguments have B = " << q[0] << " and Hq = " << q[1] << "; each must be at most 65535 (grid limit)";
    // Kernels round lengths up to whole tiles in int32 arithmetic.
    constexpr int64_t kMaxLen = std::numeric_limits<int32_t>::max() - 1024;
    user_check(q[2] <= kMaxLen && k[2] <= kMaxLen)
        << "arguments have Nq = " << q[2] << " and Nk = " << k[2] << "; each must be at most " << kMaxLen;

    if (spec.returns_lse()) {
        user_check(a.lse.has_value()) << "the spec returns LSE (return_lse()) but args.lse is empty; pass a "
                                         "[B, Hq, Nq] f32 tensor";
        check_view("lse", *a.lse, 3);
        user_check(a.lse->dtype == DType::f32) << "argument 'lse' has dtype " << dtype_name(a.lse->dtype)
                                               << "; LSE is f32";
        const auto& l = a.lse->shape;
        user_check(l[0] == q[0] && l[1] == q[1] && l[2] == q[2])
            << "argument 'lse' has shape " << shape_str(l) << " but must be [" << q[0] << ", " << q[1] << ", "
            << q[2] << "] (B, Hq, Nq)";
        user_check(reinterpret_cast<uintptr_t>(a.lse->data) % 4 == 0) << "argument 'lse' is not 4-byte aligned";
        for (int d = 0; d < 3 && !empty; ++d)
            user_check(a.lse->strides[d] != 0 || l[d] <= 1)
                << "argument 'lse' has stride 0 in dimension " << d << "; outputs must not overlap";
    } else {
        user_check(!a.lse.has_value()) << "args.lse was given but the spec does not return LSE; build the spec "
                                          "with .return_lse() or leave args.lse empty";
    }
    // Scalars first: the bounds of captured-tensor reads use their values.
    check_scalars(in, a);
    check_captured(in, a, codegen::LaunchExtents{q[0], q[1], k[1], q[2], k[2]});
    if (spec.has_sinks()) {
        // Read at [h] for every query head (a stride of 0 shares one sink).
        const TensorView& s = a.tensors.at(spec.sinks_name());
        user_check(s.shape[0] == q[1]) << "the sinks tensor '" << spec.sinks_name() << "' has shape "
                                       << shape_str(s.shape) << " but must be [Hq] = [" << q[1]
                                       << "]: one sink logit per query head";
    }
    if (spec.has_reciprocal_band()) {
        // alpha read at [h]; s_ji pairs query j with key i, so the lengths must agree.
        const TensorView& al = a.tensors.at(spec.reciprocal_band_alpha());
        user_check(al.shape[0] == q[1]) << "the reciprocal band's alpha '" << spec.reciprocal_band_alpha()
                                        << "' has shape " << shape_str(al.shape) << " but must be [Hq] = [" << q[1]
                                        << "]: one weight a query head (a stride of 0 shares one)";
        user_check(q[2] == k[2]) << "the reciprocal band adds s_ji = <q_j, k_i> to s_ij, which needs self-attention: "
                                 << "q has " << q[2] << " rows and k " << k[2]
                                 << "; give q and k the same length (Nq == Nk)";
    }
    if (spec.has_latent()) check_latent_weights(spec, a, q[1]);
    if (spec.has_gate()) {
        // Read at [b][h][q][d] for every output element (stride 0 broadcasts).
        const TensorView& g = a.tensors.at(spec.gate_name());
        user_check(g.shape == a.o.shape) << "the gate tensor '" << spec.gate_name() << "' has shape "
                                         << shape_str(g.shape) << " but must have the shape of the output 'o', "
                                         << shape_str(a.o.shape) << " ([B, Hq, Nq, Dv]; expand a broadcast gate "
                                         << "to it with stride 0)";
        user_check(g.data != a.o.data || a.o.numel() == 0)
            << "the gate tensor '" << spec.gate_name() << "' is the same memory as 'o'; pass a separate buffer";
    }
}

void check_grad_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& g) {
    const DType dt = spec.dtype();
    check_qkvo("d_o", g.d_o, dt);
    check_qkvo("dq", g.dq, dt);
    check_qkvo("dk", g.dk, dt);
    check_qkvo("dv", g.dv, dt);
    auto same_shape = [](const char* name, const TensorView& t, const char* like_name, const TensorView& like) {
        user_check(t.shape == like.shape) << "argument '" << name << "' has shape " << shape_str(t.shape)
                                          << " but must have the shape of '" << like_name << "', "
                                          << shape_str(like.shape);
    };
    same_shape("d_o", g.d_o, "o", fwd.o);
    same_shape("dq", g.dq, "q", fwd.q);
    same_shape("dk", g.dk, "k", fwd.k);
    same_shape("dv", g.dv, "v", fwd.v);
    const std::pair<const char*, const TensorView*> outputs[] = {{"dq", &g.dq}, {"dk", &g.dk}, {"dv", &g.dv}};
    // An empty tensor takes no memory, so it shares none (an allocator may give it any address,
    // even the next tensor's): only non-empty ones are compared.
    auto data_if_any = [](const TensorView& t) { return t.numel() > 0 ? t.data : nullptr; };
    const std::pair<const char*, const void*> inputs[] = {
        {"q", data_if_any(fwd.q)}, {"k", data_if_any(fwd.k)},     {"v", data_if_any(fwd.v)},
        {"o", data_if_any(fwd.o)}, {"d_o", data_if_any(g.d_o)}, {"lse", fwd.lse ? data_if_any(*fwd.lse) : nullptr}};
    for (const auto& [name, t] : outputs) {
        // An empty output (Nq == 0 makes dq empty, and its contiguous strides 0) writes
        // nothing, so it overlaps nothing.
        if (t->numel() == 0) continue;
        for (int d = 0; d < 3; ++d)
            user_check(t->strides[d] != 0 || t->shape[d] <= 1)
                << "argument '" << name << "' has stride 0 in dimension " << d << "; outputs must not overlap";
        // The kernels read every input after writing some outputs: an output in place of an
        // input would be read half-written.
        for (const auto& [in_name, data] : inputs)
            user_check(t->data != data) << "argument '" << name << "' is the same memory as '" << in_name
                                        << "'; gradients cannot be computed in place: pass a separate buffer";
        for (const auto& [in_name, view] : fwd.tensors)
            user_check(t->data != data_if_any(view)) << "argument '" << name << "' is the same memory as captured tensor '"
                                             << in_name << "', which the backward reads; pass a separate buffer";
        for (const auto& [other, u] : outputs)
            user_check(t == u || t->data != data_if_any(*u))
                << "arguments '" << name << "' and '" << other << "' are the same memory; pass separate buffers";
    }
    // The gradients of the structural tensors (the other captured tensors':
    // check_input_grad_args): an output like dq, of the tensor's shape and dtype.
    auto check_structural_grad = [&](const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                                     const char* what, const std::string& shape_text) {
        const auto it = g.grads.find(name);
        if (it == g.grads.end()) return;
        const TensorView& t = it->second;
        const std::string arg = "grads['" + name + "']";
        check_view(arg, t, static_cast<int>(shape.size()));
        user_check(t.dtype == dtype) << "argument " << arg << " has dtype " << dtype_name(t.dtype) << "; the gradient of "
                                     << what << " has its dtype, " << dtype_name(dtype);
        user_check(t.shape == shape) << "argument " << arg << " has shape " << shape_str(t.shape) << " but must be "
                                     << shape_text << " = " << shape_str(shape);
        user_check(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0)
            << "argument " << arg << " is not aligned to its element size";
        if (t.numel() == 0) return;  // writes nothing: overlaps nothing (as dq above)
        for (size_t d = 0; d < shape.size(); ++d)
            user_check(t.strides[d] != 0 || t.shape[d] <= 1)
                << "argument " << arg << " has stride 0" << (shape.size() > 1 ? " in dimension " + std::to_string(d) : "")
                << "; outputs must not overlap";
        for (const auto& [in_name, data] : inputs)
            user_check(t.data != data) << "argument " << arg << " is the same memory as '" << in_name
                                       << "'; pass a separate buffer";
        for (const auto& [in_name, view] : fwd.tensors)
            user_check(t.data != data_if_any(view)) << "argument " << arg << " is the same memory as captured tensor '"
                                            << in_name << "', which the backward reads; pass a separate buffer";
        for (const auto& [other, u] : outputs)
            user_check(t.data != data_if_any(*u)) << "argument " << arg << " and '" << other
                                          << "' are the same memory; pass separate buffers";
    };
    if (spec.has_sinks())
        check_structural_grad(spec.sinks_name(), spec.sinks_dtype(), {fwd.q.shape[1]}, "the sinks", "[Hq]");
    if (spec.has_gate()) {
        check_structural_grad(spec.gate_name(), spec.dtype(), fwd.o.shape, "the gate", "[B, Hq, Nq, Dv]");
        // Each gate element reads one output element; a gate broadcast by stride 0 would sum.
        const TensorView& gate = fwd.tensors.at(spec.gate_name());
        if (g.grads.count(spec.gate_name()) && gate.numel() > 0)
            for (size_t d = 0; d < gate.shape.size(); ++d)
                user_check(gate.strides[d] != 0 || gate.shape[d] <= 1)
                    << "the gate tensor '" << spec.gate_name() << "' broadcasts (stride 0) in dimension " << d
                    << ", and its gradient would be a sum over that dimension, which attnjit does not compute; "
                       "pass a materialised gate (e.g. .contiguous()) to get its gradient";
    }
    if (spec.has_latent()) {
        // Written by latent_gemm two elements at a time (api/latent_backward.h).
        const int64_t hq = fwd.q.shape[1], L = spec.latent_dim();
        const std::pair<std::string, std::vector<int64_t>> weights[] = {
            {spec.latent_w_qlat(), {hq, spec.head_dim_qk(), L}}, {spec.latent_w_vup(), {hq, L, spec.head_dim_v()}}};
        for (const auto& [name, shape] : weights) {
            check_structural_grad(name, spec.dtype(), shape, "a latent projection weight",
                                  name == spec.latent_w_qlat() ? "[Hq, Dqk, L]" : "[Hq, L, Dv]");
            const auto it = g.grads.find(name);
            if (it == g.grads.end()) continue;
            const TensorView& t = it->second;
            user_check(t.strides[2] == 1 && t.strides[0] % 2 == 0 && t.strides[1] % 2 == 0 &&
                       reinterpret_cast<uintptr_t>(t.data) % 4 == 0)
                << "argument grads['" << name << "'] (strides " << shape_str(t.strides)
                << ") must have unit stride on its last dimension, even strides elsewhere and a 4-byte aligned "
                   "start (it is written two elements at a time); pass a contiguous tensor";
        }
    }
    if (spec.has_score_conv())
        check_structural_grad(spec.score_conv_name(), spec.score_conv_dtype(),
                              {fwd.q.shape[1], spec.score_conv_rows(), spec.score_conv_cols()},
                              "the score convolution's kernel", "[Hq, c_q, c_k]");
}

}  // namespace attnjit
