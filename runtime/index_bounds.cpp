#include "runtime/index_bounds.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <sstream>

#include "dsl/printer.h"
#include "support/error.h"

namespace attnjit::runtime {
namespace {

using namespace dsl;

// An int range; `opaque` when it depends on data the host cannot see (then it is the
// whole int32 range and overflow is not reported: the expression must bound itself).
struct Range {
    int64_t lo, hi;
    bool opaque = false;
};

constexpr int64_t kIntMin = INT32_MIN, kIntMax = INT32_MAX;
const Range kOpaque{kIntMin, kIntMax, true};

// What each built-in variable ranges over on the current path.
struct Domain {
    std::map<VarKind, Range> vars;
    bool empty() const {
        for (const auto& [v, r] : vars)
            if (r.lo > r.hi) return true;
        return false;
    }
};

class Bounds {
public:
    Bounds(Guards guards, const std::map<std::string, double>& scalars,
           const std::map<std::string, TensorView>& tensors)
        : guards_(guards), scalars_(scalars), tensors_(tensors) {}

    // Checks every load reachable from e on the paths allowed by d.
    void walk(const Expr& e, const Domain& d) {
        if (d.empty()) return;  // unreachable on this path
        if (auto s = e.as<Select>()) {
            walk(s->cond, d);
            walk(s->t, refine(d, s->cond, true));
            walk(s->f, refine(d, s->cond, false));
            return;
        }
        if (auto b = e.as<Binary>(); b && (b->op == BinaryOp::And || b->op == BinaryOp::Or)) {
            walk(b->a, d);
            walk(b->b, refine(d, b->a, b->op == BinaryOp::And));  // C short-circuits
            return;
        }
        if (auto l = e.as<TensorLoad>()) check_load(*l, d);
        for_each_child(e, [&](const Expr& c) { walk(c, d); });
    }

private:
    template <class F>
    static void for_each_child(const Expr& e, F f) {
        if (auto l = e.as<TensorLoad>())
            for (const auto& i : l->indices) f(i);
        else if (auto u = e.as<Unary>()) f(u->a);
        else if (auto b = e.as<Binary>()) f(b->a), f(b->b);
        else if (auto s = e.as<Select>()) f(s->cond), f(s->t), f(s->f);
        else if (auto c = e.as<Cast>()) f(c->a);
    }

    void check_load(const TensorLoad& l, const Domain& d) {
        const TensorView& t = tensors_.at(l.name);
        for (size_t i = 0; i < l.indices.size(); ++i) {
            if (t.strides[i] == 0) continue;  // broadcast: every index reads the same element
            Range r = range(l.indices[i], d);
            if (r.lo >= 0 && r.hi < t.shape[i]) continue;
            std::ostringstream s;
            s << "tensor '" << l.name << "' has shape " << shape_text(t) << " but index " << i << " ("
              << l.indices[i] << ")";
            if (r.opaque)
                s << " depends on values the host cannot see (another tensor's elements or a float), so it "
                     "could read out of bounds; bound it in the expression, e.g. clamp("
                  << l.indices[i] << ", 0, " << t.shape[i] - 1 << ")";
            else
                s << " ranges over [" << r.lo << ", " << r.hi << "] for these inputs; give dimension " << i
                  << " at least " << r.hi + 1 << " elements (indices must be >= 0), or stride 0 to broadcast it";
            user_error << s.str();
        }
    }

    static std::string shape_text(const TensorView& t) {
        std::ostringstream s;
        s << "[";
        for (size_t i = 0; i < t.shape.size(); ++i) s << (i ? ", " : "") << t.shape[i];
        return s.str() + "]";
    }

    // Result of int arithmetic, which the GPU does in int32.
    Range checked(int64_t lo, int64_t hi, bool opaque, const Expr& e) {
        if (opaque) return kOpaque;
        user_check(lo >= kIntMin && hi <= kIntMax)
            << "index expression " << e << " ranges over [" << lo << ", " << hi
            << "] for these inputs, beyond int32, where the GPU computes it; index arithmetic must stay "
               "within int32 (split the tensor or use a smaller shape)";
        return {lo, hi, false};
    }

    Range range(const Expr& e, const Domain& d) {
        if (auto c = e.as<Const>()) return {c->i, c->i};
        if (auto v = e.as<Var>()) {
            auto it = d.vars.find(v->var);
            internal_check(it != d.vars.end()) << "no range for " << var_name(v->var);
            return it->second;
        }
        if (auto s = e.as<ScalarParam>()) {
            auto it = scalars_.find(s->name);
            internal_check(it != scalars_.end()) << "scalar " << s->name << " was checked present";
            auto v = static_cast<int64_t>(it->second);
            return {v, v};
        }
        if (auto u = e.as<Unary>()) {
            Range a = range(u->a, d);
            if (u->op == UnaryOp::Neg) return checked(-a.hi, -a.lo, a.opaque, e);
            if (u->op == UnaryOp::Abs) {
                int64_t lo = (a.lo <= 0 && a.hi >= 0) ? 0 : std::min(std::abs(a.lo), std::abs(a.hi));
                return checked(lo, std::max(std::abs(a.lo), std::abs(a.hi)), a.opaque, e);
            }
            return kOpaque;
        }
        if (auto b = e.as<Binary>()) return binary(*b, e, d);
        if (auto s = e.as<Select>()) {
            Domain dt = refine(d, s->cond, true), df = refine(d, s->cond, false);
            if (dt.empty()) return range(s->f, df);
            if (df.empty()) return range(s->t, dt);
            Range t = range(s->t, dt), f = range(s->f, df);
            return {std::min(t.lo, f.lo), std::max(t.hi, f.hi), t.opaque || f.opaque};
        }
        return kOpaque;  // loads of int tensors, float -> int casts
    }

    Range binary(const Binary& b, const Expr& e, const Domain& d) {
        Range x = range(b.a, d), y = range(b.b, d);
        const bool opaque = x.opaque || y.opaque;
        switch (b.op) {
        case BinaryOp::Add: return checked(x.lo + y.lo, x.hi + y.hi, opaque, e);
        case BinaryOp::Sub: return checked(x.lo - y.hi, x.hi - y.lo, opaque, e);
        case BinaryOp::Mul: {
            int64_t c[] = {x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi};
            return checked(*std::min_element(c, c + 4), *std::max_element(c, c + 4), opaque, e);
        }
        // min/max bound even an opaque side: clamp(doc[b, j], 0, 9) is in [0, 9].
        case BinaryOp::Min: return {std::min(x.lo, y.lo), std::min(x.hi, y.hi), x.opaque && y.opaque};
        case BinaryOp::Max: return {std::max(x.lo, y.lo), std::max(x.hi, y.hi), x.opaque && y.opaque};
        case BinaryOp::Div:
            if (y.opaque || y.lo != y.hi || y.lo == 0) return kOpaque;
            if (y.lo > 0) return checked(x.lo / y.lo, x.hi / y.lo, x.opaque, e);
            return checked(x.hi / y.lo, x.lo / y.lo, x.opaque, e);
        case BinaryOp::Mod: {
            if (y.opaque || y.lo != y.hi || y.lo == 0) return kOpaque;
            const int64_t m = std::abs(y.lo) - 1;  // C: the sign follows the dividend
            if (x.opaque) return {-m, m, false};
            if (x.lo >= 0) return {0, std::min(x.hi, m)};
            if (x.hi <= 0) return {std::max(x.lo, -m), 0};
            return {-m, m};
        }
        default: return kOpaque;
        }
    }

    // The domain on the path where `cond` has the value `truth`.
    Domain refine(const Domain& d, const Expr& cond, bool truth) {
        if (guards_ == Guards::Ignore) return d;
        if (auto u = cond.as<Unary>(); u && u->op == UnaryOp::Not) return refine(d, u->a, !truth);
        auto b = cond.as<Binary>();
        if (!b) return d;
        if ((b->op == BinaryOp::And && truth) || (b->op == BinaryOp::Or && !truth))
            return refine(refine(d, b->a, truth), b->b, truth);
        if (!is_comparison(b->op) || b->a.type() != Type::Int) return d;
        BinaryOp op = b->op;
        if (!truth) op = negated_comparison(op);
        Domain out = d;
        narrow(out, b->a, op, b->b, d);
        narrow(out, b->b, flipped_comparison(op), b->a, d);
        return out;
    }

    // If `side` is a variable, narrow it by "side op other".
    void narrow(Domain& out, const Expr& side, BinaryOp op, const Expr& other, const Domain& d) {
        auto v = side.as<Var>();
        if (!v || !out.vars.count(v->var)) return;
        Range o = range(other, d);
        if (o.opaque) return;
        Range& r = out.vars[v->var];
        switch (op) {
        case BinaryOp::Lt: r.hi = std::min(r.hi, o.hi - 1); break;
        case BinaryOp::Le: r.hi = std::min(r.hi, o.hi); break;
        case BinaryOp::Gt: r.lo = std::max(r.lo, o.lo + 1); break;
        case BinaryOp::Ge: r.lo = std::max(r.lo, o.lo); break;
        case BinaryOp::Eq:
            r.lo = std::max(r.lo, o.lo);
            r.hi = std::min(r.hi, o.hi);
            break;
        default: break;
        }
    }

    Guards guards_;
    const std::map<std::string, double>& scalars_;
    const std::map<std::string, TensorView>& tensors_;
};

}  // namespace

void check_tensor_reads(const Expr& expr, Guards guards, const LaunchExtents& x,
                        const std::map<std::string, double>& scalars,
                        const std::map<std::string, TensorView>& tensors) {
    if (!expr.defined() || x.batch == 0 || x.q_len == 0) return;  // nothing is read
    Domain d;
    d.vars[VarKind::Batch] = {0, x.batch - 1};
    d.vars[VarKind::Head] = {0, x.q_heads - 1};
    d.vars[VarKind::KvHead] = {0, x.kv_heads - 1};
    d.vars[VarKind::QIdx] = {0, x.q_len - 1};
    d.vars[VarKind::KvIdx] = {0, x.kv_len - 1};
    d.vars[VarKind::QLen] = {x.q_len, x.q_len};
    d.vars[VarKind::KvLen] = {x.kv_len, x.kv_len};
    Bounds(guards, scalars, tensors).walk(expr, d);
}

}  // namespace attnjit::runtime
