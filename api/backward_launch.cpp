#include "api/backward_launch.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "runtime/params_packer.h"

#include <cstddef>
#include <cstring>
#include "support/error.h"

namespace attnjit::api {
namespace {

// backward_params packs attnjit::GradArg byte by byte; the field offsets it assumes.
using GradArg3 = GradArg<float, 3>;
static_assert(offsetof(GradArg3, planes) == 8 && offsetof(GradArg3, plane_elems) == 16 &&
                  offsetof(GradArg3, plane_b) == 24 && offsetof(GradArg3, plane_h) == 28 &&
                  offsetof(GradArg3, stride) == 32 && offsetof(GradArg3, shape) == 56 && sizeof(GradArg3) == 80 &&
                  sizeof(GradArg<float, 0>) == 48,
              "attnjit::GradArg's layout (backward/grad_args.h) differs from what backward_params packs");

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

size_t backward_dq_turns_bytes(const LaunchArgs& fwd, const KernelConfig& fused) {
    const size_t tiles = static_cast<size_t>((fwd.q.shape[2] + fused.tile.block_m - 1) / fused.tile.block_m);
    const size_t split = static_cast<size_t>(fused_column_split(fused.head_dim_qk, fused.head_dim_v));
    return sizeof(int) * static_cast<size_t>(fwd.q.shape[0] * fwd.q.shape[1]) * tiles * split;
}

int batch_sum_chunks(size_t tiles, int64_t batch, int64_t elems_per_chunk) {
    constexpr size_t kTargetCtas = 768;                  // ~2 waves of 132 SMs x 3 CTAs
    constexpr int64_t kMinBatches = 8;                   // per chunk: the partials' traffic stays small
    constexpr int64_t kMaxPartialBytes = int64_t{256} << 20;
    int64_t chunks = tiles >= kTargetCtas ? 1 : static_cast<int64_t>((kTargetCtas + tiles - 1) / tiles);
    chunks = std::min(chunks, std::max<int64_t>(1, batch / kMinBatches));
    chunks = std::min(chunks, std::max<int64_t>(1, kMaxPartialBytes / std::max<int64_t>(1, 4 * elems_per_chunk)));
    return static_cast<int>(chunks);
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
    b.delta_d_o = g.d_o.data;  // without a gate (set_gate_args)
    strides3(b.delta_do_stride, g.d_o);
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

void set_gate_args(BackwardArgs& b, const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& g,
                   void* gated_d_o) {
    const TensorView& gate = fwd.tensors.at(spec.gate_name());
    const auto& o = fwd.o.shape;
    b.d_o = gated_d_o;  // contiguous [B, Hq, Nq, Dv]
    b.do_stride[0] = o[1] * o[2] * o[3];
    b.do_stride[1] = o[2] * o[3];
    b.do_stride[2] = o[3];
    b.gate = gate.data;
    for (int d = 0; d < 4; ++d) b.gate_stride[d] = gate.strides[d];
    const auto it = g.grads.find(spec.gate_name());
    if (it == g.grads.end()) return;
    b.d_gate = it->second.data;
    for (int d = 0; d < 4; ++d) b.d_gate_stride[d] = it->second.strides[d];
}

std::optional<SinkGradArgs> sink_grad_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& g) {
    if (!spec.has_sinks()) return std::nullopt;
    auto it = g.grads.find(spec.sinks_name());
    if (it == g.grads.end()) return std::nullopt;
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
                                           const LaunchArgs& fwd, const GradArgs* grads, const GradWork* work,
                                           const std::map<std::string, GradPlanes>* planes) {
    std::vector<unsigned char> bytes = runtime::pack_params(layout, &block, sizeof block, fwd.scalars, fwd.tensors);
    for (const auto& f : layout.fields) {
        if (f.kind == codegen::ParamsField::Kind::GradWork) {
            internal_check(work != nullptr && f.size == static_cast<int>(sizeof(GradWork)))
                << "a gradient workspace field without a workspace";
            std::memcpy(bytes.data() + f.offset, work, sizeof(GradWork));
        } else if (f.kind == codegen::ParamsField::Kind::Grad) {
            internal_check(grads != nullptr && grads->grads.count(f.name))
                << "gradient output '" << f.name << "' has no value; arguments must be checked first";
            const TensorView& g = grads->grads.at(f.name);
            const int dims = f.rank > 0 ? f.rank : 1;
            internal_check(f.size == 32 + 16 * dims && static_cast<int>(g.shape.size()) == f.rank)
                << "gradient field '" << f.name << "' of size " << f.size << " for rank " << g.shape.size();
            std::vector<long long> strides(dims, 0), shape(dims, 1);
            for (int d = 0; d < f.rank; ++d) {
                strides[d] = g.strides[d];
                shape[d] = g.shape[d];
            }
            GradPlanes pl;
            if (planes) {
                auto it = planes->find(f.name);
                if (it != planes->end()) pl = it->second;
            }
            // attnjit::GradArg<T, R>: ptr, planes, plane_elems, plane_b, plane_h, stride[], shape[].
            unsigned char* at = bytes.data() + f.offset;
            std::memcpy(at, &g.data, 8);
            std::memcpy(at + 8, &pl.planes, 8);
            std::memcpy(at + 16, &pl.elems, 8);
            std::memcpy(at + 24, &pl.plane_b, 4);
            std::memcpy(at + 28, &pl.plane_h, 4);
            std::memcpy(at + 32, strides.data(), 8 * dims);
            std::memcpy(at + 32 + 8 * dims, shape.data(), 8 * dims);
        }
    }
    return bytes;
}

size_t grad_work_ticket_offset(int sites, int ctas) {
    return static_cast<size_t>(sites) * static_cast<size_t>(ctas) * (sizeof(float) + sizeof(long long) * 2);
}

size_t grad_work_bytes(int sites, int ctas) { return grad_work_ticket_offset(sites, ctas) + 16; }

GradWork grad_work(void* base, int sites, int ctas) {
    // index first (8-byte aligned), then partials, then the ticket.
    const size_t n = static_cast<size_t>(sites) * static_cast<size_t>(ctas);
    auto* bytes = static_cast<unsigned char*>(base);
    GradWork w{};
    w.index = reinterpret_cast<long long*>(bytes);
    w.partials = reinterpret_cast<float*>(bytes + n * sizeof(long long));
    w.ticket = reinterpret_cast<unsigned*>(bytes + grad_work_ticket_offset(sites, ctas));
    w.ctas = ctas;
    return w;
}

runtime::Dim3 backward_grid(const KernelConfig& c, const LaunchArgs& fwd) {
    const int b = static_cast<int>(fwd.q.shape[0]);
    const int split = c.kind == KernelKind::backward_fused ? fused_column_split(c.head_dim_qk, c.head_dim_v) : 1;
    if (owns_keys(c.kind))
        return runtime::Dim3{static_cast<unsigned>(ceil_div(static_cast<int>(fwd.k.shape[2]), c.tile.block_n) * split),
                             static_cast<unsigned>(fwd.k.shape[1]), static_cast<unsigned>(b)};
    internal_check(is_backward(c.kind)) << "backward_grid of a " << kernel_kind_name(c.kind) << " kernel";
    return runtime::Dim3{static_cast<unsigned>(ceil_div(static_cast<int>(fwd.q.shape[2]), c.tile.block_m)),
                         static_cast<unsigned>(fwd.q.shape[1]), static_cast<unsigned>(b)};
}

}  // namespace attnjit::api
