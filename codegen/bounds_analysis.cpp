#include "codegen/bounds_analysis.h"

#include <map>
#include <tuple>
#include <type_traits>

#include "dsl/printer.h"
#include "dsl/visitor.h"
#include "support/error.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;
using Formula = BoundsProgram::Formula;
using FOp = BoundsProgram::Op;
using Step = BoundsProgram::Step;

// Calls f(node) with the node's concrete type, through dsl::IRVisitor. f must accept
// every kind of ATTNJIT_FOR_EACH_NODE: a kind without an overload does not compile, and
// a node whose kind is outside the list (which IRVisitor's switch passes over) is an
// internal error, so no node is ever skipped silently.
template <class F>
class Dispatch : public IRVisitor {
public:
    explicit Dispatch(F& f) : f_(f) {}
    void run(const Expr& e) {
        IRVisitor::visit(e);
        internal_check(handled_) << "bounds analysis: node kind " << static_cast<int>(e.kind())
                                 << " has no bounds rule";
    }

protected:
#define ATTNJIT_VISIT(n)                                 \
    void visit(const n* node, const Expr& self) final { \
        handled_ = true;                                 \
        f_(*node, self);                                 \
    }
    ATTNJIT_FOR_EACH_NODE(ATTNJIT_VISIT)
#undef ATTNJIT_VISIT

private:
    F& f_;
    bool handled_ = false;
};

template <class F>
void dispatch(const Expr& e, F&& f) {
    Dispatch<std::remove_reference_t<F>>(f).run(e);
}

enum class Guards { Narrow, Ignore };

IndexVar index_var(VarKind v) {
    switch (v) {
    case VarKind::Batch: return IndexVar::Batch;
    case VarKind::Head: return IndexVar::Head;
    case VarKind::KvHead: return IndexVar::KvHead;
    case VarKind::QIdx: return IndexVar::QIdx;
    case VarKind::KvIdx: return IndexVar::KvIdx;
    case VarKind::QLen: return IndexVar::QLen;
    case VarKind::KvLen: return IndexVar::KvLen;
    case VarKind::Score: break;
    }
    internal_error << "bounds analysis: " << var_name(v) << " is not an int variable";
    return IndexVar::Batch;
}

interval::Cmp cmp(BinaryOp op) {
    switch (op) {
    case BinaryOp::Lt: return interval::Cmp::Lt;
    case BinaryOp::Le: return interval::Cmp::Le;
    case BinaryOp::Gt: return interval::Cmp::Gt;
    case BinaryOp::Ge: return interval::Cmp::Ge;
    case BinaryOp::Eq: return interval::Cmp::Eq;
    case BinaryOp::Ne: return interval::Cmp::Ne;
    default: break;
    }
    internal_error << "bounds analysis: " << binary_name(op) << " is not a comparison";
    return interval::Cmp::Ne;
}

// Builds the program: walk() adds the steps of every read, range() the formula of an
// int expression, refine() the domain of a path. Equal formulas and domains are shared.
class Analysis {
public:
    explicit Analysis(BoundsProgram& p) : p_(p) {}

    void run(const Expr& e, Guards g) {
        if (!e.defined()) return;
        guards_ = g;
        walk(e, 0);
    }

private:
    // ---- Reads ----
    void walk(const Expr& e, int d) {
        dispatch(e, [&](const auto& node, const Expr&) { walk_node(node, d); });
    }
    void walk_node(const Const&, int) {}
    void walk_node(const Var&, int) {}
    void walk_node(const ScalarParam&, int) {}
    void walk_node(const TensorLoad& l, int d) {
        for (size_t i = 0; i < l.indices.size(); ++i) {
            Step s;
            s.kind = Step::Kind::Read;
            s.tensor = l.name;
            s.index = to_string(l.indices[i]);
            s.dim = static_cast<int>(i);
            s.formula = range(l.indices[i], d);
            p_.steps.push_back(std::move(s));
        }
        for (const auto& i : l.indices) walk(i, d);
    }
    void walk_node(const Unary& u, int d) { walk(u.a, d); }
    void walk_node(const Binary& b, int d) {
        walk(b.a, d);
        if (b.op == BinaryOp::And || b.op == BinaryOp::Or)  // C short-circuits
            walk_on_path(b.b, d, refine(d, b.a, b.op == BinaryOp::And));
        else
            walk(b.b, d);
    }
    void walk_node(const Select& s, int d) {
        walk(s.cond, d);
        walk_on_path(s.t, d, refine(d, s.cond, true));
        walk_on_path(s.f, d, refine(d, s.cond, false));
    }
    void walk_node(const Cast& c, int d) { walk(c.a, d); }
    void walk_node(const Temp& t, int) { no_temps(t); }

    // The reads of e on a path of domain `path` inside domain d: skipped when it is empty.
    void walk_on_path(const Expr& e, int d, int path) {
        if (path == d) return walk(e, d);
        const size_t enter = p_.steps.size();
        Step s;
        s.kind = Step::Kind::Enter;
        s.domain = path;
        p_.steps.push_back(s);
        walk(e, path);
        p_.steps[enter].skip_to = static_cast<int>(p_.steps.size());
    }

    // ---- Index ranges ----
    int range(const Expr& e, int d) {
        internal_check(e.type() == Type::Int) << "bounds analysis: index " << e << " is not an int";
        int out = -1;
        dispatch(e, [&](const auto& node, const Expr& self) { out = range_node(node, self, d); });
        return out;
    }
    int range_node(const Const& c, const Expr&, int) {
        Formula f;
        f.op = FOp::Const;
        f.value = c.i;
        return formula(f);
    }
    int range_node(const Var& v, const Expr&, int d) {
        Formula f;
        f.op = FOp::Var;
        f.var = index_var(v.var);
        f.domain = d;
        return formula(f);
    }
    int range_node(const ScalarParam& s, const Expr&, int) {
        Formula f;
        f.op = FOp::Scalar;
        f.text = s.name;
        return formula(f);
    }
    int range_node(const TensorLoad&, const Expr&, int) { return opaque(); }  // an element
    int range_node(const Cast&, const Expr&, int) { return opaque(); }        // float -> int
    int range_node(const Unary& u, const Expr& self, int d) {
        if (u.op != UnaryOp::Neg && u.op != UnaryOp::Abs) return opaque();
        return arith(u.op == UnaryOp::Neg ? FOp::Neg : FOp::Abs, self, range(u.a, d), -1);
    }
    int range_node(const Binary& b, const Expr& self, int d) {
        const int x = range(b.a, d), y = range(b.b, d);
        switch (b.op) {
        case BinaryOp::Add: return arith(FOp::Add, self, x, y);
        case BinaryOp::Sub: return arith(FOp::Sub, self, x, y);
        case BinaryOp::Mul: return arith(FOp::Mul, self, x, y);
        case BinaryOp::Div: return arith(FOp::Div, self, x, y);
        case BinaryOp::Mod: return operation(FOp::Mod, x, y);
        case BinaryOp::Min: return operation(FOp::Min, x, y);
        case BinaryOp::Max: return operation(FOp::Max, x, y);
        default: return opaque();
        }
    }
    int range_node(const Select& s, const Expr&, int d) {
        Formula f;
        f.op = FOp::Select;
        f.domain = refine(d, s.cond, true);
        f.else_domain = refine(d, s.cond, false);
        f.a = range(s.t, f.domain);
        f.b = range(s.f, f.else_domain);
        return formula(f);
    }
    int range_node(const Temp& t, const Expr&, int) { return no_temps(t); }

    // An operation whose result is checked against int32 (its text goes in the message).
    int arith(FOp op, const Expr& self, int a, int b) {
        Formula f;
        f.op = op;
        f.text = to_string(self);
        f.a = a;
        f.b = b;
        return formula(f);
    }
    int operation(FOp op, int a, int b) {
        Formula f;
        f.op = op;
        f.a = a;
        f.b = b;
        return formula(f);
    }
    int opaque() { return formula(Formula{}); }

    // ---- Guards ----
    // The domain on the path where `cond` has the value `truth`.
    int refine(int d, const Expr& cond, bool truth) {
        if (guards_ == Guards::Ignore) return d;
        if (auto u = cond.as<Unary>(); u && u->op == UnaryOp::Not) return refine(d, u->a, !truth);
        auto b = cond.as<Binary>();
        if (!b) return d;  // a condition it cannot read narrows nothing (its reads are walked)
        if ((b->op == BinaryOp::And && truth) || (b->op == BinaryOp::Or && !truth))
            return refine(refine(d, b->a, truth), b->b, truth);
        if (!is_comparison(b->op) || b->a.type() != Type::Int) return d;
        const BinaryOp op = truth ? b->op : negated_comparison(b->op);
        BoundsProgram::Domain out;
        out.parent = d;
        if (auto v = b->a.as<Var>()) out.narrowings.push_back({index_var(v->var), cmp(op), range(b->b, d)});
        if (auto v = b->b.as<Var>())
            out.narrowings.push_back({index_var(v->var), cmp(flipped_comparison(op)), range(b->a, d)});
        return out.narrowings.empty() ? d : domain(out);
    }

    static int no_temps(const Temp& t) {
        internal_error << "bounds analysis: temporary " << t.name
                       << " in a spec's expression (the pass reads the spec, before cse)";
        return -1;
    }

    int formula(const Formula& f) {
        auto key = std::make_tuple(f.op, f.value, f.var, f.domain, f.else_domain, f.text, f.a, f.b);
        auto [it, fresh] = formula_ids_.emplace(key, static_cast<int>(p_.formulas.size()));
        if (fresh) p_.formulas.push_back(f);
        return it->second;
    }
    int domain(const BoundsProgram::Domain& dom) {
        std::vector<std::tuple<IndexVar, interval::Cmp, int>> steps;
        for (const auto& n : dom.narrowings) steps.emplace_back(n.var, n.op, n.bound);
        auto [it, fresh] = domain_ids_.emplace(std::make_pair(dom.parent, steps), static_cast<int>(p_.domains.size()));
        if (fresh) p_.domains.push_back(dom);
        return it->second;
    }

    BoundsProgram& p_;
    Guards guards_ = Guards::Narrow;
    std::map<std::tuple<FOp, long long, IndexVar, int, int, std::string, int, int>, int> formula_ids_;
    std::map<std::pair<int, std::vector<std::tuple<IndexVar, interval::Cmp, int>>>, int> domain_ids_;
};

}  // namespace

BoundsProgram analyze_tensor_reads(const Expr& score_mod, const Expr& mask) {
    BoundsProgram p;
    Analysis a(p);
    a.run(score_mod, Guards::Narrow);
    a.run(mask, Guards::Ignore);  // classify() reads the mask over whole tiles
    return p;
}

BoundsProgram analyze_tensor_reads(const dsl::AttentionSpec& spec) {
    return analyze_tensor_reads(spec.score_mod(), spec.mask());
}

}  // namespace attnjit::codegen
