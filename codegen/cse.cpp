#include "codegen/cse.h"

#include <map>

#include "dsl/equality.h"
#include "dsl/visitor.h"
#include "support/error.h"

namespace attnjit::codegen {

using namespace dsl;

bool speculatable(const Expr& e) {
    bool ok = true;
    for_each_node(e, [&](const Expr& n) {
        if (n.as<TensorLoad>()) ok = false;
        if (auto b = n.as<Binary>(); b && b->type == Type::Int && (b->op == BinaryOp::Div || b->op == BinaryOp::Mod))
            ok = false;
    });
    return ok;
}

bool short_circuits(BinaryOp op) { return op == BinaryOp::And || op == BinaryOp::Or; }

namespace {

bool trivial(const Expr& e) { return e.as<Const>() || e.as<Var>() || e.as<ScalarParam>() || e.as<Temp>(); }

// Structural interning: equal expressions get the same id (hash buckets + equal()).
class Interner {
public:
    int id(const Expr& e) {
        auto& bucket = buckets_[structural_hash(e)];
        for (const auto& [x, i] : bucket)
            if (equal(x, e)) return i;
        bucket.emplace_back(e, next_);
        return next_++;
    }

private:
    std::map<uint64_t, std::vector<std::pair<Expr, int>>> buckets_;
    int next_ = 0;
};

class Cse {
public:
    explicit Cse(std::string prefix) : prefix_(std::move(prefix)) {}

    // Counts occurrences; a repeated subtree's children are counted once, so (a+b)*c
    // appearing twice does not also bind a+b.
    void count(const Expr& e, bool conditional) {
        if (trivial(e)) return;
        if (!conditional || speculatable(e)) {
            if (++counts_[interner_.id(e)] > 1) return;
        }
        for_children(e, conditional, [&](const Expr& c, bool cond) { count(c, cond); });
    }

    Expr rebuild(const Expr& e, bool conditional) {
        if (trivial(e)) return e;
        const int id = interner_.id(e);
        if (auto it = bound_.find(id); it != bound_.end()) return it->second;
        Expr r = rebuild_children(e, conditional);
        if (counts_[id] >= 2) {
            // Counted twice means evaluated unconditionally at least once, or safe to
            // evaluate anywhere: binding it up front is sound.
            std::string name = prefix_ + std::to_string(bindings_.size());
            bindings_.push_back(Binding{name, r, Level::Element});
            Expr t = Temp::make(name, r.type());
            bound_[id] = t;
            return t;
        }
        return r;
    }

    Bindings take_bindings() { return std::move(bindings_); }

private:
    template <class F>
    static void for_children(const Expr& e, bool conditional, F&& f) {
        if (auto t = e.as<TensorLoad>()) {
            for (const auto& i : t->indices) f(i, conditional);
        } else if (auto u = e.as<Unary>()) {
            f(u->a, conditional);
        } else if (auto b = e.as<Binary>()) {
            f(b->a, conditional);
            f(b->b, conditional || short_circuits(b->op));
        } else if (auto s = e.as<Select>()) {
            f(s->cond, conditional);
            f(s->t, true);
            f(s->f, true);
        } else if (auto c = e.as<Cast>()) {
            f(c->a, conditional);
        }
    }

    Expr rebuild_children(const Expr& e, bool conditional) {
        if (auto t = e.as<TensorLoad>()) {
            std::vector<Expr> idx;
            for (const auto& i : t->indices) idx.push_back(rebuild(i, conditional));
            return TensorLoad::make(t->name, t->dtype, idx);
        }
        if (auto u = e.as<Unary>()) return Unary::make(u->op, rebuild(u->a, conditional));
        if (auto b = e.as<Binary>()) {
            Expr a = rebuild(b->a, conditional);
            return Binary::make(b->op, a, rebuild(b->b, conditional || short_circuits(b->op)));
        }
        if (auto s = e.as<Select>()) {
            Expr c = rebuild(s->cond, conditional);
            Expr t = rebuild(s->t, true);
            return Select::make(c, t, rebuild(s->f, true));
        }
        if (auto c = e.as<Cast>()) return Cast::make(c->type, rebuild(c->a, conditional));
        internal_error << "cse: unexpected node";
        return e;
    }

    std::string prefix_;
    Interner interner_;
    std::map<int, int> counts_;
    std::map<int, Expr> bound_;
    Bindings bindings_;
};

}  // namespace

CseResult cse(const std::vector<Expr>& exprs, const std::string& prefix) {
    Cse pass(prefix);
    for (const auto& e : exprs)
        if (e.defined()) pass.count(e, false);
    CseResult out;
    for (const auto& e : exprs) out.results.push_back(e.defined() ? pass.rebuild(e, false) : e);
    out.bindings = pass.take_bindings();
    return out;
}

}  // namespace attnjit::codegen
