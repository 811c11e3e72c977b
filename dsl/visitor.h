// Traversal bases. IRVisitor recurses into children by default; IRMutator rebuilds a
// node only when a child changed (copy on write), so unchanged subtrees stay shared.
#pragma once

#include <functional>

#include "dsl/ir.h"

namespace attnjit::dsl {

class IRVisitor {
public:
    virtual ~IRVisitor() = default;
    void visit(const Expr& e);

protected:
#define ATTNJIT_VISIT(n) virtual void visit(const n* node, const Expr& self);
    ATTNJIT_FOR_EACH_NODE(ATTNJIT_VISIT)
#undef ATTNJIT_VISIT
};

class IRMutator {
public:
    virtual ~IRMutator() = default;
    virtual Expr mutate(const Expr& e);

protected:
#define ATTNJIT_VISIT(n) virtual Expr visit(const n* node, const Expr& self);
    ATTNJIT_FOR_EACH_NODE(ATTNJIT_VISIT)
#undef ATTNJIT_VISIT
};

// Calls f on every node, parents before children.
void for_each_node(const Expr& e, const std::function<void(const Expr&)>& f);

// Replaces every node for which f returns a defined Expr (children are not visited
// inside a replaced node).
Expr substitute(const Expr& e, const std::function<Expr(const Expr&)>& f);

}  // namespace attnjit::dsl
