#include "api/backward_launch.h"

#include <cstdint>
#include <limits>

#include "runtime/params_packer.h"
#include "support/error.h"

namespace attnjit::api {
namespace {

void strides3(long long out[3], const TensorView& t) {
    for (int d = 0; d < 3; ++d) out[d] = t.strides[d];
}

}  // namespace

size_t backward_stats_bytes(const LaunchArgs& fwd) {
    return 2 * sizeof(float) * static_cast<size_t>(fwd.q.shape[0] * fwd.q.shape[1] * fwd.q.shape[2]);
}

size_t backward_dq_accum_bytes(const LaunchArgs& fwd) {
    return sizeof(float) * static_cast<size_t>(fwd.q.shape[0] * fwd.q.shape[1] * fwd.q.shape[2] * fwd.q.shape[3]);
}

BackwardArgs backward_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& g, float* stats,
                           float* dq_accum) {
    BackwardArgs b{};
    b.q = fwd.q.data;
    b.k = fwd.k.data;
    b.v = fwd.v.data;
    b.o = fwd.o.data;
    b.d_o = g.d_o.data;
    b.lse = static_cast<const float*>(fwd.lse->data);
    b.dq = g.dq.data;
    b.dk = g.dk.data;
    b.dv = g.dv.data;
    b.stats = stats;
    b.dq_accum = dq_accum;
    strides3(b.q_stride, fwd.q);
    strides3(b.k_stride, fwd.k);
    strides3(b.v_stride, fwd.v);
    strides3(b.o_stride, fwd.o);
    strides3(b.do_stride, g.d_o);
    strides3(b.lse_stride, *fwd.lse);
    strides3(b.dq_stride, g.dq);
    strides3(b.dk_stride, g.dk);
    strides3(b.dv_stride, g.dv);
    b.batch = static_cast<int>(fwd.q.shape[0]);
    b.q_heads = static_cast<int>(fwd.q.shape[1]);
    b.kv_heads = static_cast<int>(fwd.k.shape[1]);
    b.q_len = static_cast<int>(fwd.q.shape[2]);
    b.kv_len = static_cast<int>(fwd.k.shape[2]);
    b.group = b.q_heads / b.kv_heads;
    b.scale = static_cast<float>(spec.scale_or_default());
    return b;
}

std::optional<SinkGradArgs> sink_grad_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& g) {
    if (!spec.has_sinks()) return std::nullopt;
    auto it = g.tensors.find(spec.sinks_name());
    if (it == g.tensors.end()) return std::nullopt;
    SinkGradArgs s{};
    s.o = fwd.o.data;
    s.d_o = g.d_o.data;
    s.lse = static_cast<const float*>(fwd.lse->data);
    s.d_sinks = it->second.data;
    strides3(s.o_stride, fwd.o);
    strides3(s.do_stride, g.d_o);
    strides3(s.lse_stride, *fwd.lse);
    s.d_sinks_stride = it->second.strides[0];
    s.batch = static_cast<int>(fwd.q.shape[0]);
    s.q_heads = static_cast<int>(fwd.q.shape[1]);
    s.q_len = static_cast<int>(fwd.q.shape[2]);
    s.kv_len = static_cast<int>(fwd.k.shape[2]);
    const int64_t per_batch = (fwd.q.shape[2] + kSinkGradChunkRows - 1) / kSinkGradChunkRows;
    const int64_t chunks = fwd.q.shape[0] * per_batch;
    user_check(chunks <= std::numeric_limits<int32_t>::max())
        << "arguments have B * ceil(Nq / " << kSinkGradChunkRows << ") = " << chunks
        << " row chunks for the sinks' gradient, more than a grid holds (2^31 - 1); split the batch";
    s.chunks_per_batch = static_cast<int>(per_batch);
    s.chunks = static_cast<int>(chunks);
    return s;
}

size_t sink_grad_partials_bytes(const SinkGradArgs& s) {
    return sizeof(float) * static_cast<size_t>(s.q_heads) * static_cast<size_t>(s.chunks);
}

runtime::Dim3 sink_grad_grid(const SinkGradArgs& s) {
    if (s.phase == 0) return runtime::Dim3{static_cast<unsigned>(s.chunks), static_cast<unsigned>(s.q_heads), 1u};
    return runtime::Dim3{static_cast<unsigned>(s.q_heads), 1u, 1u};
}

std::vector<unsigned char> sink_grad_params(const codegen::ParamsLayout& layout, const SinkGradArgs& block,
                                            const LaunchArgs& fwd) {
    return runtime::pack_params(layout, &block, sizeof block, fwd.scalars, fwd.tensors);
}

std::vector<unsigned char> backward_params(const codegen::ParamsLayout& layout, const BackwardArgs& block,
                                           const LaunchArgs& fwd) {
    return runtime::pack_params(layout, &block, sizeof block, fwd.scalars, fwd.tensors);
}

runtime::Dim3 backward_grid(const KernelConfig& c, const LaunchArgs& fwd) {
    const int b = static_cast<int>(fwd.q.shape[0]);
    if (owns_keys(c.kind))
        return runtime::Dim3{static_cast<unsigned>(ceil_div(static_cast<int>(fwd.k.shape[2]), c.tile.block_n)),
                             static_cast<unsigned>(fwd.k.shape[1]), static_cast<unsigned>(b)};
    internal_check(is_backward(c.kind)) << "backward_grid of a " << kernel_kind_name(c.kind) << " kernel";
    return runtime::Dim3{static_cast<unsigned>(ceil_div(static_cast<int>(fwd.q.shape[2]), c.tile.block_m)),
                         static_cast<unsigned>(fwd.q.shape[1]), static_cast<unsigned>(b)};
}

}  // namespace attnjit::api
