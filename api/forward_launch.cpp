#include "api/forward_launch.h"

#include <algorithm>

#include "attnjit/common/math_constants.h"
#include "runtime/params_packer.h"
#include "support/env.h"

namespace attnjit::api {
namespace {

void strides3(long long out[3], const TensorView& t) {
    for (int d = 0; d < 3; ++d) out[d] = t.strides[d];
}

}  // namespace

ForwardArgs forward_args(const AttentionSpec& spec, const LaunchArgs& a) {
    ForwardArgs f{};
    f.q = a.q.data;
    f.k = a.k.data;
    f.v = a.v.data;
    f.o = a.o.data;
    f.lse = a.lse ? static_cast<float*>(a.lse->data) : nullptr;
    strides3(f.q_stride, a.q);
    strides3(f.k_stride, a.k);
    strides3(f.v_stride, a.v);
    strides3(f.o_stride, a.o);
    if (a.lse) strides3(f.lse_stride, *a.lse);
    f.batch = static_cast<int>(a.q.shape[0]);
    f.q_heads = static_cast<int>(a.q.shape[1]);
    f.kv_heads = static_cast<int>(a.k.shape[1]);
    f.q_len = static_cast<int>(a.q.shape[2]);
    f.kv_len = static_cast<int>(a.k.shape[2]);
    f.group = f.q_heads / f.kv_heads;
    const double scale = spec.scale_or_default();
    f.scale = static_cast<float>(scale);
    f.scale_log2 = static_cast<float>(scale * kLog2eD);
    return f;
}

std::vector<unsigned char> forward_params(const PreparedKernel& k, const AttentionSpec& spec, const LaunchArgs& args,
                                          int* work_counter) {
    ForwardArgs block = forward_args(spec, args);
    block.work_counter = work_counter;
    block.cta_order = k.config.schedule.order;
    return runtime::pack_params(k.layout, &block, sizeof block, args.scalars, args.tensors);
}

runtime::Dim3 forward_grid(const KernelConfig& config, const LaunchArgs& a) {
    return runtime::Dim3{static_cast<unsigned>(ceil_div(static_cast<int>(a.q.shape[2]), config.tile.block_m)),
                         static_cast<unsigned>(a.q.shape[1]), static_cast<unsigned>(a.q.shape[0])};
}

void launch_sm90_forward(const PreparedKernel& k, const AttentionSpec& spec, const LaunchArgs& args,
                         const ForwardTmaMaps& maps, WorkCounters& counters, int sms, Stream stream) {
    const runtime::Dim3 items = forward_grid(k.config, args);
    const long long n = static_cast<long long>(items.x) * items.y * items.z;
    // One CTA an SM: the kernel's registers (384 threads at 168, 512 at 128) allow no second one.
    const Sm90Grid g = k.config.schedule.grid;
    const bool persistent = g == Sm90Grid::persistent ||
                            (g == Sm90Grid::by_size && n > sms && !env::sm90_grid_one_cta_an_item());
    // No counter (a stream captured before it had one): one CTA an item.
    int* const counter = persistent ? counters.for_stream(static_cast<CUstream>(stream)) : nullptr;
    if (!counter) {
        k.launch(items, forward_params(k, spec, args), stream, &maps);
        return;
    }
    k.launch(runtime::Dim3{static_cast<unsigned>(std::min<long long>(n, sms)), 1, 1},
             forward_params(k, spec, args, counter), stream, &maps);
}

}  // namespace attnjit::api
