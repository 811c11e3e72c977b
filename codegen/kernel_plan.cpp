#include "codegen/kernel_plan.h"

#include "dsl/printer.h"
#include "support/error.h"

namespace attnjit::codegen {

Bindings KernelPlan::all_bindings() const {
    Bindings all = head;
    all.insert(all.end(), row.begin(), row.end());
    for (const Bindings* list : {&score_bindings, &mask_bindings})
        for (const auto& b : *list)
            if (!find_binding(all, b.name)) all.push_back(b);
    return all;
}

ElemKind elem_kind(DType d) {
    switch (d) {
    case DType::f16: return ElemKind::f16;
    case DType::bf16: return ElemKind::bf16;
    case DType::f32: return ElemKind::f32;
    default: break;
    }
    user_error << "Q, K, V dtype " << dtype_name(d) << " is not supported; use f16, bf16 or f32";
    return ElemKind::f16;
}

const char* elem_kind_name(ElemKind e) {
    switch (e) {
    case ElemKind::f16: return "f16";
    case ElemKind::bf16: return "bf16";
    case ElemKind::f32: return "f32";
    }
    return "?";
}

namespace {

void print_bindings(std::ostream& os, const char* title, const Bindings& bs) {
    if (bs.empty()) return;
    os << "  " << title << ":\n";
    for (const auto& b : bs) os << "    " << b.name << " = " << b.value << "\n";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const KernelPlan& p) {
    os << "KernelPlan {\n";
    os << "  spec: " << p.spec << "\n";
    os << "  element: " << elem_kind_name(p.elem) << ", head dims " << p.head_dim_qk << "x" << p.head_dim_v << "\n";
    print_bindings(os, "head", p.head);
    print_bindings(os, "row", p.row);
    print_bindings(os, "score_mod temporaries", p.score_bindings);
    os << "  score_mod: ";
    if (p.has_score_mod()) os << p.score_mod << "\n";
    else os << "none (t = s)\n";
    print_bindings(os, "mask temporaries", p.mask_bindings);
    os << "  mask: ";
    if (p.has_mask()) os << p.mask << "\n";
    else os << "none (keep all)\n";
    os << "  can_classify: " << (p.classify.can_classify ? "true" : "false") << "\n";
    if (!p.scalars.empty()) {
        os << "  scalars:";
        for (const auto& [n, t] : p.scalars) os << " " << n << ":" << t;
        os << "\n";
    }
    if (!p.tensors.empty()) {
        os << "  tensors:";
        for (const auto& [n, t] : p.tensors) os << " " << n << ":" << dtype_name(t.dtype) << "[" << t.rank << "]";
        os << "\n";
    }
    if (!p.tensor_reads.reads_nothing()) os << "  tensor reads (bounds program):\n" << p.tensor_reads;
    return os << "}";
}

}  // namespace attnjit::codegen
