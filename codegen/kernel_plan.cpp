#include "codegen/kernel_plan.h"

#include "dsl/printer.h"
#include "support/error.h"

namespace attnjit::codegen {

Bindings KernelPlan::all_bindings() const {
    Bindings all = head;
    all.insert(all.end(), row.begin(), row.end());
    for (const Bindings* list : {&score_bindings, &mask_bindings, &d_score_bindings, &grad_bindings, &conv_mask_bindings})
        for (const auto& b : *list)
            if (!find_binding(all, b.name)) all.push_back(b);
    return all;
}

int KernelPlan::grad_accums() const {
    int n = 0;
    for (const auto& s : grad_sites) n += s.store || s.table || s.per_query || s.per_key ? 0 : 1;
    return n;
}

int KernelPlan::grad_table_output() const {
    if (grad_planes) return -1;
    for (const auto& s : grad_sites)
        if (s.table) return s.output;
    return -1;
}

int KernelPlan::grad_accum_outputs() const {
    if (grad_planes) return 0;  // backward_dkdv
    int n = 0;
    for (const auto& o : grad_outputs) n += o.stored ? 0 : 1;  // they come first
    return n;
}

int KernelPlan::grad_query_sites() const {
    int n = 0;
    for (const auto& s : grad_sites) n += s.per_query ? 1 : 0;
    return n;
}

int KernelPlan::grad_key_sites() const {
    int n = 0;
    for (const auto& s : grad_sites) n += s.per_key ? 1 : 0;
    return n;
}

bool KernelPlan::grad_stores() const {
    for (const auto& s : grad_sites)
        if (s.store) return true;
    return false;
}

bool KernelPlan::grad_batch_sum() const {
    return grad_sites.size() == 1 && grad_sites[0].store && !grad_sites[0].per_query && !grad_sites[0].per_key &&
           !grad_sites[0].table;
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
    if (p.gradients) {
        print_bindings(os, "d_score temporaries", p.d_score_bindings);
        os << "  d_score: ";
        if (p.has_score_grad()) os << p.d_score << "\n";
        else os << "1\n";
    }
    if (p.has_input_grads()) {
        print_bindings(os, "gradient temporaries", p.grad_bindings);
        for (const auto& s : p.grad_sites) {
            const InputGradOutput& o = p.grad_outputs[static_cast<size_t>(s.output)];
            os << "  gradient of " << (o.scalar ? "scalar '" : "tensor '") << o.name << "'";
            if (s.read.defined()) os << " at " << s.read << " (" << s.reduction << ")";
            os << (s.store       ? std::string(": stored")
                   : s.per_query ? ": summed per query row, then stored (row site " + std::to_string(s.row_site) + ")"
                   : s.table  ? ": summed per table element (index " + std::to_string(s.table_dim) + ")"
                                 : ": summed per CTA, slot " + std::to_string(s.accum))
               << ", d t / d read = "
               << s.partial << "\n";
        }
    }
    if (p.grad_planes) {
        for (const auto& s : p.grad_sites)
            os << "  gradient of tensor '" << p.grad_outputs[static_cast<size_t>(s.output)].name << "' at " << s.read
               << " (" << s.reduction << "): summed per key, then stored (key site " << s.row_site
               << "), d t / d read = " << s.partial << "\n";
    }
    if (p.bias_tile) {
        os << "  bias tile: " << p.bias_tile->tensor << "[";
        for (const auto& i : p.bias_tile->leading) os << i << ", ";
        os << "q_idx, kv_idx] (" << dtype_name(p.bias_tile->dtype) << ")\n";
    }
    os << "  can_classify: " << (p.classify.can_classify ? "true" : "false") << "\n";
    const SpecInputs& in = p.inputs;
    if (!in.scalars.empty()) {
        os << "  scalars:";
        for (const auto& [n, t] : in.scalars) os << " " << n << ":" << t;
        os << "\n";
    }
    if (!in.tensors.empty()) {
        os << "  tensors:";
        for (const auto& [n, t] : in.tensors) os << " " << n << ":" << dtype_name(t.dtype) << "[" << t.rank << "]";
        os << "\n";
    }
    if (!in.tensor_reads.reads_nothing()) os << "  tensor reads (bounds program):\n" << in.tensor_reads;
    return os << "}";
}

}  // namespace attnjit::codegen
