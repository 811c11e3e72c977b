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
};

}  // namespace

const KernelKindInfo& kernel_kind_info(KernelKind kind) {
    for (const auto& k : kKinds)
        if (k.kind == kind) return k;
    internal_error << "kernel kind " << static_cast<int>(kind) << " has no entry in codegen/kernel_kinds.cpp";
    return kKinds[0];
}

}  // namespace attnjit::codegen
