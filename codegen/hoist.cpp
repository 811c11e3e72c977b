#include "codegen/hoist.h"

#include <algorithm>
#include <map>

#include "codegen/cse.h"
#include "dsl/equality.h"
#include "dsl/visitor.h"
#include "support/error.h"

namespace attnjit::codegen {

using namespace dsl;

namespace {

Level var_level(VarKind v) {
    switch (v) {
    case VarKind::QIdx: return Level::Row;
    case VarKind::KvIdx:
    case VarKind::Score: return Level::Element;
    default: return Level::Head;
    }
}

Level level_with(const Expr& e, const std::map<std::string, Level>& temps) {
    Level l = Level::Head;
    for_each_node(e, [&](const Expr& n) {
        if (auto v = n.as<Var>()) l = std::max(l, var_level(v->var));
        if (auto t = n.as<Temp>()) {
            auto it = temps.find(t->name);
            internal_check(it != temps.end()) << "hoist: temporary " << t->name << " has no binding";
            l = std::max(l, it->second);
        }
    });
    return l;
}

bool trivial(const Expr& e) { return e.as<Const>() || e.as<Var>() || e.as<ScalarParam>() || e.as<Temp>(); }

class Hoister {
public:
    HoistResult run(const Bindings& bindings, const std::vector<Expr>& results) {
        for (const auto& b : bindings) {
            Expr v = rename(b.value);
            Level l = level_with(v, levels_);
            Expr processed = process(v, l, false);
            renamed_[b.name] = append(processed, l);
        }
        for (const auto& r : results)
            out_.results.push_back(r.defined() ? process(rename(r), Level::Element, false) : r);
        return std::move(out_);
    }

private:
    Expr rename(const Expr& e) {
        return substitute(e, [&](const Expr& n) -> Expr {
            auto t = n.as<Temp>();
            if (!t) return Expr();
            auto it = renamed_.find(t->name);
            internal_check(it != renamed_.end()) << "hoist: temporary " << t->name << " used before its binding";
            return it->second;
        });
    }

    Bindings& list(Level l) { return l == Level::Head ? out_.head : l == Level::Row ? out_.row : out_.element; }

    // Appends a binding at level l (reusing an equal one) and returns its Temp.
    Expr append(const Expr& value, Level l) {
        Bindings& bs = list(l);
        for (const auto& b : bs)
            if (equal(b.value, value)) return Temp::make(b.name, value.type());
        const char* prefix = l == Level::Head ? "h" : l == Level::Row ? "r" : "t";
        std::string name = prefix + std::to_string(bs.size());
        bs.push_back(Binding{name, value, l});
        levels_[name] = l;
        return Temp::make(name, value.type());
    }

    // The Temp of a level-l binding whose value equals e, or undefined.
    Expr existing(const Expr& e, Level l) {
        for (const auto& b : list(l))
            if (equal(b.value, e)) return Temp::make(b.name, e.type());
        return Expr();
    }

    // Rewrites e, evaluated at level ctx, so that its maximal lower-level parts read fields.
    Expr process(const Expr& e, Level ctx, bool conditional) {
        if (trivial(e)) return e;
        Level l = level_with(e, levels_);
        if (l < ctx) {
            if (!conditional || speculatable(e)) return append(process(e, l, false), l);
            // Guarded and unsafe to speculate: only a field that is already computed
            // unconditionally (an equal, unguarded occurrence) may be read instead.
            if (Expr t = existing(e, l); t.defined()) return t;
        }
        return substitute_children(e, ctx, conditional);
    }

    Expr substitute_children(const Expr& e, Level ctx, bool conditional) {
        if (auto t = e.as<TensorLoad>()) {
            std::vector<Expr> idx;
            for (const auto& i : t->indices) idx.push_back(process(i, ctx, conditional));
            return TensorLoad::make(t->name, t->dtype, idx);
        }
        if (auto u = e.as<Unary>()) return Unary::make(u->op, process(u->a, ctx, conditional));
        if (auto b = e.as<Binary>()) {
            // A float division by something of a lower level (a scalar, a per-head value):
            // a multiplication by its reciprocal, which moves to that level (softcap's
            // score / cap: one division a head instead of one a score; within an ulp or two
            // of the quotient, and the same infinities and NaNs but where 1 / y overflows).
            // Only where the reciprocal does become a field: a guarded divisor that may not be
            // speculated (a tensor load under a select) stays a division, and rewriting it would
            // only produce another division by the same divisor, forever.
            if (b->op == BinaryOp::Div && e.type() == Type::Float && level_with(b->b, levels_) < ctx) {
                const Const* c = b->b.as<Const>();
                const Expr reciprocal = c && b->b.type() == Type::Float
                                            ? Const::make_float(1.0 / c->f)
                                            : Binary::make(BinaryOp::Div, Const::make_float(1.0), b->b);
                if (trivial(reciprocal) || !conditional || speculatable(reciprocal) ||
                    existing(reciprocal, level_with(reciprocal, levels_)).defined())
                    return Binary::make(BinaryOp::Mul, process(b->a, ctx, conditional),
                                        process(reciprocal, ctx, conditional));
            }
            Expr a = process(b->a, ctx, conditional);
            // && and || short-circuit: their right operand is as guarded as a select branch.
            return Binary::make(b->op, a, process(b->b, ctx, conditional || short_circuits(b->op)));
        }
        if (auto s = e.as<Select>()) {
            Expr c = process(s->cond, ctx, conditional);
            Expr t = process(s->t, ctx, true);
            return Select::make(c, t, process(s->f, ctx, true));
        }
        if (auto c = e.as<Cast>()) return Cast::make(c->type, process(c->a, ctx, conditional));
        internal_error << "hoist: unexpected node";
        return e;
    }

    HoistResult out_;
    std::map<std::string, Expr> renamed_;  // CSE name -> new Temp
    std::map<std::string, Level> levels_;  // new name -> level
};

}  // namespace

Level level_of(const Expr& e, const Bindings& bindings) {
    std::map<std::string, Level> temps;
    for (const auto& b : bindings) temps[b.name] = b.level;
    return level_with(e, temps);
}

HoistResult hoist(const Bindings& bindings, const std::vector<Expr>& results) {
    return Hoister().run(bindings, results);
}

}  // namespace attnjit::codegen
