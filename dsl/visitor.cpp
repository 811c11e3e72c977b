#include "dsl/visitor.h"

#include "support/error.h"

namespace attnjit::dsl {

void IRVisitor::visit(const Expr& e) {
    internal_check(e.defined()) << "visiting an undefined Expr";
    switch (e.kind()) {
#define ATTNJIT_CASE(n)                      \
    case NodeKind::n:                        \
        visit(static_cast<const n*>(e.get()), e); \
        return;
        ATTNJIT_FOR_EACH_NODE(ATTNJIT_CASE)
#undef ATTNJIT_CASE
    }
}

void IRVisitor::visit(const Const*, const Expr&) {}
void IRVisitor::visit(const Var*, const Expr&) {}
void IRVisitor::visit(const ScalarParam*, const Expr&) {}
void IRVisitor::visit(const Temp*, const Expr&) {}
void IRVisitor::visit(const TensorLoad* n, const Expr&) {
    for (const auto& i : n->indices) visit(i);
}
void IRVisitor::visit(const Unary* n, const Expr&) { visit(n->a); }
void IRVisitor::visit(const Binary* n, const Expr&) {
    visit(n->a);
    visit(n->b);
}
void IRVisitor::visit(const Select* n, const Expr&) {
    visit(n->cond);
    visit(n->t);
    visit(n->f);
}
void IRVisitor::visit(const Cast* n, const Expr&) { visit(n->a); }

Expr IRMutator::mutate(const Expr& e) {
    internal_check(e.defined()) << "mutating an undefined Expr";
    switch (e.kind()) {
#define ATTNJIT_CASE(n) \
    case NodeKind::n: return visit(static_cast<const n*>(e.get()), e);
        ATTNJIT_FOR_EACH_NODE(ATTNJIT_CASE)
#undef ATTNJIT_CASE
    }
    return e;
}

Expr IRMutator::visit(const Const*, const Expr& self) { return self; }
Expr IRMutator::visit(const Var*, const Expr& self) { return self; }
Expr IRMutator::visit(const ScalarParam*, const Expr& self) { return self; }
Expr IRMutator::visit(const Temp*, const Expr& self) { return self; }

Expr IRMutator::visit(const TensorLoad* n, const Expr& self) {
    std::vector<Expr> idx;
    bool changed = false;
    for (const auto& i : n->indices) {
        idx.push_back(mutate(i));
        changed |= !idx.back().same_as(i);
    }
    return changed ? TensorLoad::make(n->name, n->dtype, idx) : self;
}

Expr IRMutator::visit(const Unary* n, const Expr& self) {
    Expr a = mutate(n->a);
    return a.same_as(n->a) ? self : Unary::make(n->op, a);
}

Expr IRMutator::visit(const Binary* n, const Expr& self) {
    Expr a = mutate(n->a), b = mutate(n->b);
    return a.same_as(n->a) && b.same_as(n->b) ? self : Binary::make(n->op, a, b);
}

Expr IRMutator::visit(const Select* n, const Expr& self) {
    Expr c = mutate(n->cond), t = mutate(n->t), f = mutate(n->f);
    return c.same_as(n->cond) && t.same_as(n->t) && f.same_as(n->f) ? self : Select::make(c, t, f);
}

Expr IRMutator::visit(const Cast* n, const Expr& self) {
    Expr a = mutate(n->a);
    return a.same_as(n->a) ? self : Cast::make(n->type, a);
}

void for_each_node(const Expr& e, const std::function<void(const Expr&)>& f) {
    struct Walker : IRVisitor {
        const std::function<void(const Expr&)>& f;
        explicit Walker(const std::function<void(const Expr&)>& fn) : f(fn) {}
        using IRVisitor::visit;
#define ATTNJIT_WALK(n)                                   \
    void visit(const n* node, const Expr& self) override { \
        f(self);                                           \
        IRVisitor::visit(node, self);                      \
    }
        ATTNJIT_FOR_EACH_NODE(ATTNJIT_WALK)
#undef ATTNJIT_WALK
    } w(f);
    w.visit(e);
}

Expr substitute(const Expr& e, const std::function<Expr(const Expr&)>& f) {
    struct Sub : IRMutator {
        const std::function<Expr(const Expr&)>& f;
        explicit Sub(const std::function<Expr(const Expr&)>& fn) : f(fn) {}
        Expr mutate(const Expr& x) override {
            Expr r = f(x);
            return r.defined() ? r : IRMutator::mutate(x);
        }
    } s(f);
    return s.mutate(e);
}

}  // namespace attnjit::dsl
