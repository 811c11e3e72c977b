#include "codegen/input_grads.h"

#include <map>

#include "codegen/autodiff.h"
#include "dsl/printer.h"
#include "dsl/visitor.h"
#include "support/error.h"

namespace attnjit::codegen {

namespace {

void set_roles(InputGradSite& s) {
    using Role = InputGradSite::Role;
    for (const dsl::Expr& index : s.read.as<dsl::TensorLoad>()->indices) {
        Role role = Role::Const;
        int coords = 0;
        bool other = false;
        dsl::for_each_node(index, [&](const dsl::Expr& n) {
            if (const auto* v = n.as<dsl::Var>()) {
                switch (v->var) {
                case dsl::VarKind::Batch: role = Role::Batch; ++coords; break;
                case dsl::VarKind::Head: role = Role::Head; ++coords; break;
                case dsl::VarKind::KvHead: role = Role::KvHead; ++coords; break;
                case dsl::VarKind::QIdx: role = Role::Q; ++coords; break;
                case dsl::VarKind::KvIdx: role = Role::K; ++coords; break;
                case dsl::VarKind::Score: other = true; break;
                default: break;
                }
            } else if (n.as<dsl::TensorLoad>()) {
                other = true;
            }
        });
        if (other || coords > 1) role = Role::Other;
        s.roles.push_back(role);
        s.bare.push_back(index.as<dsl::Var>() != nullptr);
    }
}

}  // namespace

InputGradPlan plan_input_grads(const dsl::AttentionSpec& spec, const std::set<std::string>& grads) {
    InputGradPlan plan;
    if (grads.empty()) return plan;
    const ScoreModGradients g = score_mod_gradients(spec, grads);  // validates the names
    const auto tensors = spec.tensors();

    // Sites per output name, with whether each is stored.
    std::map<std::string, std::vector<InputGradSite>> by_name;
    for (const auto& t : g.tensors) {
        InputGradSite s;
        s.read = t.read;
        s.reduction = t.reduction;
        s.partial = t.partial;
        s.store = t.reduction.kind == GradReduction::Elementwise;
        s.table = t.reduction.kind == GradReduction::Diagonal || t.reduction.kind == GradReduction::Gather;
        s.per_query = t.reduction.kind == GradReduction::PerQuery;
        s.per_key = t.reduction.kind == GradReduction::PerKey;
        if (s.store || s.table || s.per_query || s.per_key) set_roles(s);
        if (s.table) {
            // One index varies over the score matrix (reads q_idx, kv_idx or a tensor); the
            // others read b, h, kv_head or nothing, so they are fixed within a CTA.
            using Role = InputGradSite::Role;
            for (size_t d = 0; d < s.roles.size(); ++d) {
                const Role r = s.roles[d];
                if (r == Role::Other || r == Role::Q || r == Role::K) {
                    user_check(s.table_dim < 0)
                        << "the gradient of tensor '" << t.tensor << "' read at " << t.read
                        << " needs a sum over an index that varies with q_idx, kv_idx or a tensor in more than one "
                           "dimension; attnjit sums table reads with one such index (table[h, clamp(kv_idx - q_idx, "
                           "-m, m) + m], t[h, doc[kv_idx]]) so far; drop '"
                        << t.tensor << "' from the gradients asked for";
                    s.table_dim = static_cast<int>(d);
                }
            }
            internal_check(s.table_dim >= 0) << "a table read without a varying index: " << t.read;
        }
        by_name[t.tensor].push_back(s);
    }
    int tables = 0;
    for (const auto& [name, sites] : by_name) {
        bool store = false, table = false, row = false;
        for (const auto& s : sites) {
            store = store || s.store;
            table = table || s.table;
            row = row || s.per_query || s.per_key;
        }
        user_check(!table || sites.size() == 1)
            << "the gradient of tensor '" << name << "' is a table read at " << sites.front().read
            << " and score_mod reads it at " << sites.size() - 1
            << " other place(s) too; attnjit does not sum such gradients yet; drop '" << name
            << "' from the gradients asked for";
        tables += table ? 1 : 0;
        user_check(tables <= 1) << "the gradients of two tensors read through an index that varies with q_idx, "
                                   "kv_idx or a tensor (table reads), the second '"
                                << name
                                   << "', were asked for; attnjit computes one such gradient per backward so far; drop '"
                                   << name << "' from the gradients asked for";
        user_check(!store || sites.size() == 1)
            << "the gradient of tensor '" << name << "' is read elementwise at " << sites.front().read
            << " and score_mod reads it at " << sites.size() - 1
            << " other place(s) too; attnjit does not sum such gradients yet; drop '" << name
            << "' from the gradients asked for";
        // One writer per element: a per-query or per-key site stores its row sums (direct
        // or into planes), which nothing else may add to.
        const InputGradSite& first = sites.front();
        user_check(!row || sites.size() == 1)
            << "the gradient of tensor '" << name << "' is read " << (first.per_key ? "per key" : "per query")
            << " at " << first.read << " and score_mod reads it at " << sites.size() - 1
            << " other place(s) too; attnjit sums per-query and per-key gradients of a tensor read at one place so "
               "far; read '"
            << name << "' at one place in score_mod, or drop '" << name << "' from the gradients asked for";
    }
    for (const auto& s : g.scalars) {
        InputGradSite site;
        site.partial = s.partial;
        by_name[s.scalar].push_back(site);
    }
    // Outputs named but never read by score_mod (a tensor only the mask reads, or a scalar
    // score_mod does not depend on) get zeros: an output with no site.
    for (const auto& name : grads)
        if (!by_name.count(name)) by_name[name];

    // Outputs with per-CTA sites first (they are numbered 0.. for the last CTA's sums).
    for (int pass = 0; pass < 2; ++pass)
        for (auto& [name, sites] : by_name) {
            // Sites written once per element (stored, per query, per key) go after the
            // summed ones; no site: zeros, from the last CTA.
            const bool accum =
                sites.empty() || !(sites.front().store || sites.front().per_query || sites.front().per_key);
            if (accum != (pass == 0)) continue;
            InputGradOutput out;
            out.name = name;
            out.stored = !accum;
            out.per_key = !accum && sites.front().per_key;
            auto t = tensors.find(name);
            out.scalar = t == tensors.end();
            if (!out.scalar) {
                out.dtype = t->second.dtype;
                out.rank = t->second.rank;
            }
            const int index = static_cast<int>(plan.outputs.size());
            plan.outputs.push_back(out);
            for (auto& s : sites) {
                s.output = index;
                plan.sites.push_back(s);
            }
        }
    int slot = 0, query_site = 0, key_site = 0;
    for (auto& s : plan.sites) {
        if (s.per_query) s.row_site = query_site++;
        else if (s.per_key) s.row_site = key_site++;
        else if (!s.store && !s.table) s.accum = slot++;
    }
    return plan;
}

}  // namespace attnjit::codegen
