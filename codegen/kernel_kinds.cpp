#include "codegen/kernel_kinds.h"

#include "support/error.h"

namespace attnjit::codegen {

namespace {

const KernelKindInfo kKinds[] = {
    {KernelKind::forward, "attnjit_forward", "attnjit/forward/kernel.cuh", "attnjit::ForwardTraits",
     "attnjit::forward_kernel", "fwd"},
    {KernelKind::backward_dkdv, "attnjit_backward_dkdv", "attnjit/backward/kernel.cuh", "attnjit::BackwardDkdvTraits",
     "attnjit::backward_dkdv_kernel", "bwd_dkdv"},
    {KernelKind::backward_dq, "attnjit_backward_dq", "attnjit/backward/kernel.cuh", "attnjit::BackwardDqTraits",
     "attnjit::backward_dq_kernel", "bwd_dq"},
    {KernelKind::backward_stats, "attnjit_backward_stats", "attnjit/backward/kernel.cuh",
     "attnjit::BackwardStatsTraits", "attnjit::backward_stats_kernel", "bwd_stats"},
    {KernelKind::backward_fused, "attnjit_backward_fused", "attnjit/backward/kernel.cuh",
     "attnjit::BackwardFusedTraits", "attnjit::backward_dkdv_kernel", "bwd_fused"},
    {KernelKind::backward_dq_convert, "attnjit_backward_dq_convert", "attnjit/backward/kernel.cuh",
     "attnjit::BackwardDqConvertTraits", "attnjit::backward_dq_convert_kernel", "bwd_dqconv"},
    {KernelKind::backward_sink_grad, "attnjit_backward_sink_grad", "attnjit/backward/kernel.cuh",
     "attnjit::BackwardSinkGradTraits", "attnjit::backward_sink_grad_kernel", "bwd_sinkgrad"},
    {KernelKind::latent_gemm, "attnjit_latent_gemm", "attnjit/backward/latent_gemm_kernel.cuh",
     "attnjit::LatentGemmTraits", "attnjit::latent_gemm_kernel", "latent_gemm"},
};

}  // namespace

const KernelKindInfo& kernel_kind_info(KernelKind kind) {
    for (const auto& k : kKinds)
        if (k.kind == kind) return k;
    internal_error << "kernel kind " << static_cast<int>(kind) << " has no entry in codegen/kernel_kinds.cpp";
    return kKinds[0];
}

}  // namespace attnjit::codegen
