#include "api/grad_planes.h"

#include "dsl/printer.h"
#include "support/error.h"

namespace attnjit::api {

GradPlanes plan_grad_planes(const codegen::InputGradSite& site, const TensorView& t, const LaunchArgs& fwd,
                            const std::string& name) {
    using Role = codegen::InputGradSite::Role;
    const int64_t B = fwd.q.shape[0], Hq = fwd.q.shape[1], Hkv = fwd.k.shape[1], Nq = fwd.q.shape[2],
                  Nk = fwd.k.shape[2];
    bool b_distinct = false, h_distinct = false, covered = true;
    GradPlanes pl;
    pl.elems = 1;
    for (size_t d = 0; d < site.roles.size(); ++d) {
        const Role role = site.roles[d];
        const bool broadcast = t.strides[d] == 0;
        if (!broadcast) pl.elems *= t.shape[d];
        user_check(!broadcast || t.shape[d] <= 1 || (role != Role::Q && role != Role::K))
            << "captured tensor '" << name << "' broadcasts (stride 0) in dimension " << d << ", which its read "
            << site.read << " indexes by " << (role == Role::Q ? "q_idx" : "kv_idx")
            << ": its gradient would be a sum over " << (role == Role::Q ? "queries" : "keys")
            << ", which attnjit does not compute yet; pass the tensor expanded to full size, or leave it out of "
               "CompileOptions.grads";
        if (role == Role::Batch && !broadcast) b_distinct = true;
        if ((role == Role::Head || (role == Role::KvHead && Hq == Hkv)) && !broadcast) h_distinct = true;
        int64_t want = -1;
        if (site.bare[d]) {
            if (role == Role::Batch) want = B;
            if (role == Role::Head) want = Hq;
            if (role == Role::KvHead && Hq == Hkv) want = Hkv;
            if (role == Role::Q) want = Nq;
            if (role == Role::K) want = Nk;
        }
        if (want < 0 || t.shape[d] != want || (broadcast && want > 1)) covered = false;
    }
    pl.plane_b = !b_distinct && B > 1;
    pl.plane_h = !h_distinct && Hq > 1;
    if (covered && !pl.plane_b && !pl.plane_h) pl.elems = 0;  // direct
    return pl;
}

bool batch_sum_fits(const codegen::InputGradSite& site, const TensorView& t, const GradPlanes& pl) {
    using Role = codegen::InputGradSite::Role;
    if (pl.elems == 0 || !pl.plane_b || pl.plane_h) return false;
    for (size_t d = 0; d < site.roles.size(); ++d) {
        const Role r = site.roles[d];
        const bool free = r == Role::Const || r == Role::Q || r == Role::K || (r == Role::Head && site.bare[d]);
        if (!free && t.strides[d] != 0) return false;
    }
    return true;
}

}  // namespace attnjit::api
