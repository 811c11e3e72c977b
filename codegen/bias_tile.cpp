#include "codegen/bias_tile.h"

#include "codegen/simplify.h"
#include "dsl/equality.h"
#include "dsl/visitor.h"

namespace attnjit::codegen {

using namespace dsl;

namespace {

bool is_var(const Expr& e, VarKind v) {
    auto x = e.as<Var>();
    return x && x->var == v;
}

bool reads_element_vars(const Expr& e) {
    bool found = false;
    for_each_node(e, [&](const Expr& n) {
        if (auto v = n.as<Var>())
            found |= v->var == VarKind::QIdx || v->var == VarKind::KvIdx || v->var == VarKind::Score;
    });
    return found;
}

}  // namespace

bool reads_bias_tile(const TensorLoad& load) {
    const size_t n = load.indices.size();
    if (n < 2 || !is_var(load.indices[n - 2], VarKind::QIdx) || !is_var(load.indices[n - 1], VarKind::KvIdx))
        return false;
    for (size_t i = 0; i + 2 < n; ++i)
        if (reads_element_vars(load.indices[i])) return false;
    return true;
}

std::optional<BiasTile> find_bias_tile(const Expr& score_mod) {
    if (!score_mod.defined()) return std::nullopt;
    std::vector<const TensorLoad*> reads;
    for_each_node(score_mod, [&](const Expr& n) {
        if (auto t = n.as<TensorLoad>(); t && reads_bias_tile(*t)) reads.push_back(t);
    });
    for (const TensorLoad* first : reads) {
        if (first->dtype != DType::f16 && first->dtype != DType::bf16) continue;
        bool same = true;
        for (const TensorLoad* other : reads) {
            if (other->name != first->name) continue;
            for (size_t i = 0; i + 2 < first->indices.size(); ++i)
                same = same && equal(first->indices[i], other->indices[i]);
        }
        if (!same) continue;
        BiasTile b;
        b.tensor = first->name;
        b.dtype = first->dtype;
        b.leading.assign(first->indices.begin(), first->indices.end() - 2);
        b.batch_invariant = true;
        for (const Expr& i : b.leading)
            for_each_node(i, [&](const Expr& n) { b.batch_invariant &= !is_var(n, VarKind::Batch); });
        return b;
    }
    return std::nullopt;
}

std::optional<BiasTile> bias_tile_of(const AttentionSpec& spec) {
    if (spec.has_score_conv() || !spec.score_mod().defined()) return std::nullopt;
    return find_bias_tile(simplify(spec.score_mod()));
}

}  // namespace attnjit::codegen
