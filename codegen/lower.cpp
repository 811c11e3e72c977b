#include "codegen/lower.h"

#include <chrono>
#include <set>
#include <sstream>

#include "codegen/autodiff.h"
#include "codegen/cse.h"
#include "codegen/hoist.h"
#include "codegen/input_grads.h"
#include "codegen/mask_analysis.h"
#include "codegen/simplify.h"
#include "dsl/mods.h"
#include "dsl/operators.h"
#include "dsl/printer.h"
#include "dsl/visitor.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit::codegen {
namespace {

// Times one pass (debug 1) and prints what it produced (debug 2).
class PassLog {
public:
    explicit PassLog(const char* name) : name_(name), start_(std::chrono::steady_clock::now()) {}
    template <class Print>
    void done(Print&& print) {
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
        debug(1) << "codegen pass " << name_ << ": " << ms << " ms";
        if (env::debug_level() >= 2) {
            std::ostringstream s;
            print(s);
            debug(2) << "after " << name_ << ":\n" << s.str();
        }
    }

private:
    const char* name_;
    std::chrono::steady_clock::time_point start_;
};

void print_expr(std::ostream& os, const char* what, const dsl::Expr& e) {
    os << "  " << what << ": ";
    if (e.defined()) os << e;
    else os << "none";
    os << "\n";
}

void print_bindings(std::ostream& os, const Bindings& bs) {
    for (const auto& b : bs) os << "  " << b.name << " [" << level_name(b.level) << "] = " << b.value << "\n";
}

// The element bindings `result` needs, directly or through other element bindings,
// in evaluation order.
Bindings used_bindings(const dsl::Expr& result, const Bindings& element) {
    std::set<std::string> used;
    auto mark = [&](const dsl::Expr& e) {
        dsl::for_each_node(e, [&](const dsl::Expr& n) {
            if (auto t = n.as<dsl::Temp>()) used.insert(t->name);
        });
    };
    if (result.defined()) mark(result);
    // Later bindings only read earlier ones: one backward sweep closes the set.
    for (auto it = element.rbegin(); it != element.rend(); ++it)
        if (used.count(it->name)) mark(it->value);
    Bindings out;
    for (const auto& b : element)
        if (used.count(b.name)) out.push_back(b);
    return out;
}

}  // namespace

KernelPlan lower(const dsl::AttentionSpec& spec) {
    SpecInputs inputs;
    {
        PassLog log("spec_inputs");
        inputs = spec_inputs(spec);
        log.done([&](std::ostream& os) { os << inputs.tensor_reads; });
    }
    return lower(spec, std::move(inputs));
}

KernelPlan lower(const dsl::AttentionSpec& spec, SpecInputs inputs, KernelKind kind,
                 const std::set<std::string>& grads) {
    if (spec.has_score_conv()) {
        // What the sm80 forward implements today (docs/score_convolution.md); refused rather
        // than run without the convolution.
        const std::string call = "score_conv(\"" + spec.score_conv_name() + "\", " +
                                 std::to_string(spec.score_conv_rows()) + ", " + std::to_string(spec.score_conv_cols()) +
                                 ")";
        // The backward runs backward_stats, backward_fused (the convolution's products) and
        // backward_dq_convert (dtheta's sums), then backward_dq for the gradients of captured
        // tensors and scalars; never backward_dkdv.
        user_check(kind != KernelKind::backward_dkdv)
            << call << ": backward_dkdv has no score convolution; the backward of a score convolution is "
                       "backward_fused's, with backward_dq for the gradients of captured tensors and scalars "
                       "(AttentionBackward chooses them)";
    }
    // The latent projection's backward runs the backward kernels of the spec without it over
    // projected K and V, between latent_gemm's products (api/latent_backward.h).
    user_check(!spec.has_latent() || kind == KernelKind::forward || kind == KernelKind::latent_gemm)
        << "AttentionSpec.latent(" << spec.latent_dim() << ", \"" << spec.latent_w_qlat() << "\", \""
        << spec.latent_w_vup() << "\"): " << kernel_kind_name(kind)
        << ": the latent projection's backward runs the backward kernels of the spec without latent() over K and V "
           "projected per head (AttentionBackward does this); generate those for the spec's no_latent() copy";
    KernelPlan plan;
    plan.spec = spec;
    plan.inputs = std::move(inputs);
    plan.gradients = is_backward(kind);
    // The backward takes the gate's gradient in backward_stats (backward/args.h), not through
    // a hook.
    plan.output_gate = spec.has_gate() && kind == KernelKind::forward;
    plan.score_conv = spec.has_score_conv();
    plan.latent = spec.has_latent() && kind == KernelKind::forward;
    // The band's kernels, and backward_dq_convert, which adds its parts after backward_fused.
    plan.reciprocal_band = spec.has_reciprocal_band() && (kind == KernelKind::forward || kind == KernelKind::backward_dq ||
                                                          kind == KernelKind::backward_dkdv ||
                                                          kind == KernelKind::backward_fused ||
                                                          kind == KernelKind::backward_dq_convert);
    // The forward stages the bias tile; backward_dq's batch-sum launch reads a tile that
    // every batch row shares once (sm80/backward_dq.cuh); elsewhere score_mod gathers it.
    if (kind == KernelKind::forward || kind == KernelKind::backward_dq) plan.bias_tile = bias_tile_of(spec);
    debug(1) << "lowering " << spec;

    dsl::Expr score_mod, mask, conv_mask;
    {
        PassLog log("simplify");
        score_mod = simplify(spec.score_mod());
        // The score convolution is causal (top-left): its output keeps j <= i (Mask_-inf).
        // A spec mask with it keeps both, and also gates its taps (conv_mask,
        // docs/score_convolution.md).
        if (spec.has_reciprocal_band() && spec.reciprocal_band_causal()) {
            // The causal band's T keeps j <= i (top-left), like causal().
            mask = simplify(spec.mask().defined() ? dsl::operator&&(dsl::mods::causal(), spec.mask())
                                                  : dsl::mods::causal());
        } else if (!spec.has_score_conv()) {
            mask = simplify(spec.mask());
        } else if (spec.mask().defined()) {
            conv_mask = simplify(spec.mask());
            mask = simplify(dsl::operator&&(dsl::mods::causal(), conv_mask));
        } else {
            mask = simplify(dsl::mods::causal());
        }
        // The identity score_mod and the always-true mask are no hook at all.
        if (auto v = score_mod.defined() ? score_mod.as<dsl::Var>() : nullptr; v && v->var == dsl::VarKind::Score)
            score_mod = dsl::Expr();
        if (auto c = mask.defined() ? mask.as<dsl::Const>() : nullptr; c && c->i != 0) mask = dsl::Expr();
        log.done([&](std::ostream& os) {
            print_expr(os, "score_mod", score_mod);
            print_expr(os, "mask", mask);
        });
    }

    dsl::Expr d_score;
    if (plan.gradients && score_mod.defined()) {
        PassLog log("autodiff");
        d_score = simplify(derivative(score_mod, dsl::Var::make(dsl::VarKind::Score)));
        // d score_mod / d s == 1 (a bias, ALiBi) is no hook at all.
        if (auto c = d_score.as<dsl::Const>(); c && c->type == dsl::Type::Float && c->f == 1.0) d_score = dsl::Expr();
        log.done([&](std::ostream& os) { print_expr(os, "d_score", d_score); });
    }

    InputGradPlan input_grads;
    if (kind == KernelKind::backward_dkdv && !grads.empty()) {
        // backward_dkdv sums the planes of elementwise and per-query gradients (it runs
        // after backward_dq) and computes the per-key sites itself (the CTA that owns a key
        // sees its whole column); without stored sites its plan is the one without gradients.
        PassLog log("input_grads");
        InputGradPlan ig = plan_input_grads(spec, grads);
        for (const auto& o : ig.outputs)
            if (o.stored) plan.grad_planes = true;
        if (plan.grad_planes) plan.grad_outputs = ig.outputs;
        for (const auto& s : ig.sites)
            if (s.per_key) input_grads.sites.push_back(s);
        log.done([&](std::ostream& os) {
            for (const auto& s : input_grads.sites) print_expr(os, "partial", s.partial);
        });
    }
    if (kind == KernelKind::backward_dq && !grads.empty()) {
        PassLog log("input_grads");
        input_grads = plan_input_grads(spec, grads);  // partials simplified by score_mod_gradients
        // Per-key sites are backward_dkdv's.
        std::vector<InputGradSite> mine;
        for (const auto& s : input_grads.sites)
            if (!s.per_key) mine.push_back(s);
        input_grads.sites = mine;
        log.done([&](std::ostream& os) {
            for (const auto& s : input_grads.sites) print_expr(os, "partial", s.partial);
        });
    }

    CseResult shared;
    {
        PassLog log("cse");
        std::vector<dsl::Expr> results{score_mod, mask};
        if (plan.gradients) results.push_back(d_score);
        for (const auto& s : input_grads.sites) results.push_back(s.partial);
        if (conv_mask.defined()) results.push_back(conv_mask);  // last
        shared = cse(results);
        log.done([&](std::ostream& os) {
            print_bindings(os, shared.bindings);
            print_expr(os, "score_mod", shared.results[0]);
            print_expr(os, "mask", shared.results[1]);
        });
    }

    HoistResult hoisted;
    {
        PassLog log("hoist");
        hoisted = hoist(shared.bindings, shared.results);
        plan.head = hoisted.head;
        plan.row = hoisted.row;
        plan.score_mod = hoisted.results[0];
        plan.mask = hoisted.results[1];
        plan.score_bindings = used_bindings(plan.score_mod, hoisted.element);
        plan.mask_bindings = used_bindings(plan.mask, hoisted.element);
        if (plan.gradients) {
            plan.d_score = hoisted.results[2];
            plan.d_score_bindings = used_bindings(plan.d_score, hoisted.element);
        }
        if (kind == KernelKind::backward_dq) plan.grad_outputs = input_grads.outputs;
        plan.grad_sites = input_grads.sites;  // backward_dkdv: its per-key sites
        std::set<std::string> used;
        for (size_t i = 0; i < plan.grad_sites.size(); ++i) {
            plan.grad_sites[i].partial = hoisted.results[3 + i];
            for (const auto& b : used_bindings(plan.grad_sites[i].partial, hoisted.element)) used.insert(b.name);
        }
        for (const auto& b : hoisted.element)
            if (used.count(b.name)) plan.grad_bindings.push_back(b);
        if (conv_mask.defined()) {
            plan.conv_mask = hoisted.results.back();
            plan.conv_mask_bindings = used_bindings(plan.conv_mask, hoisted.element);
        }
        log.done([&](std::ostream& os) {
            print_bindings(os, plan.head);
            print_bindings(os, plan.row);
            print_bindings(os, hoisted.element);
            print_expr(os, "score_mod", plan.score_mod);
            print_expr(os, "mask", plan.mask);
        });
    }

    {
        PassLog log("mask_analysis");
        plan.classify = mask_analysis(plan.mask, plan.all_bindings());
        if (plan.conv_mask.defined()) plan.conv_mask_classify = mask_analysis(plan.conv_mask, plan.all_bindings());
        log.done([&](std::ostream& os) {
            os << "  can_classify: " << (plan.classify.can_classify ? "true" : "false") << "\n";
            for (const auto& l : plan.classify.lines) os << "  " << l << "\n";
            if (plan.conv_mask.defined())
                for (const auto& l : plan.conv_mask_classify.lines) os << "  conv mask: " << l << "\n";
        });
    }

    debug(2) << plan;
    return plan;
}

}  // namespace attnjit::codegen
