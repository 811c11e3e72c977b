#include "codegen/bounds_check.h"

#include <array>
#include <climits>
#include <optional>
#include <sstream>

#include "codegen/interval_core.h"
#include "support/error.h"

namespace attnjit::codegen {
namespace {

using interval::IntInterval;
using FOp = BoundsProgram::Op;
using Step = BoundsProgram::Step;

// An int range; `opaque` when it depends on data the host cannot see (then it is the
// whole int32 range and overflow is not reported: the expression must bound itself).
struct Range {
    IntInterval r;
    bool opaque = false;
};

constexpr long long kIntMin = INT32_MIN, kIntMax = INT32_MAX;
const Range kOpaque{{kIntMin, kIntMax}, true};

using Vars = std::array<IntInterval, kIndexVarCount>;

bool empty(const Vars& v) {
    for (const auto& r : v)
        if (r.lo > r.hi) return true;
    return false;
}

std::string shape_text(const TensorExtent& t) {
    std::ostringstream s;
    s << "[";
    for (size_t i = 0; i < t.shape.size(); ++i) s << (i ? ", " : "") << t.shape[i];
    return s.str() + "]";
}

// Evaluates formulas and domains on demand, each once.
class Evaluator {
public:
    Evaluator(const BoundsProgram& p, const LaunchNumbers& n)
        : p_(p), n_(n), formulas_(p.formulas.size()), domains_(p.domains.size()) {}

    void run() {
        const LaunchExtents& x = n_.extents;
        if (p_.steps.empty() || x.batch == 0 || x.q_len == 0) return;  // nothing is read
        if (empty(domain(0))) return;
        for (size_t i = 0; i < p_.steps.size();) {
            const Step& s = p_.steps[i];
            if (s.kind == Step::Kind::Enter && empty(domain(s.domain))) {
                i = static_cast<size_t>(s.skip_to);  // unreachable path: none of its reads happen
                continue;
            }
            if (s.kind == Step::Kind::Read) read(s);
            ++i;
        }
    }

private:
    void read(const Step& s) {
        auto it = n_.tensors.find(s.tensor);
        internal_check(it != n_.tensors.end()) << "tensor " << s.tensor << " was checked present";
        const TensorExtent& t = it->second;
        const auto i = static_cast<size_t>(s.dim);
        internal_check(i < t.shape.size() && i < t.strides.size()) << "tensor " << s.tensor << " was checked rank";
        if (t.strides[i] == 0) return;  // broadcast: every index reads the same element
        const Range r = formula(s.formula);
        if (r.r.lo >= 0 && r.r.hi < t.shape[i]) return;
        std::ostringstream m;
        m << "tensor '" << s.tensor << "' has shape " << shape_text(t) << " but index " << i << " (" << s.index
          << ")";
        if (r.opaque)
            m << " depends on values the host cannot see (another tensor's elements or a float), so it "
                 "could read out of bounds; bound it in the expression, e.g. clamp("
              << s.index << ", 0, " << t.shape[i] - 1 << ")";
        else
            m << " ranges over [" << r.r.lo << ", " << r.r.hi << "] for these inputs; give dimension " << i
              << " at least " << r.r.hi + 1 << " elements (indices must be >= 0), or stride 0 to broadcast it";
        user_error << m.str();
    }

    const Vars& domain(int id) {
        auto& memo = domains_[static_cast<size_t>(id)];
        if (memo) return *memo;
        const BoundsProgram::Domain& d = p_.domains[static_cast<size_t>(id)];
        Vars v;
        if (id == 0) {
            const LaunchExtents& x = n_.extents;
            v[static_cast<size_t>(IndexVar::Batch)] = {0, x.batch - 1};
            v[static_cast<size_t>(IndexVar::Head)] = {0, x.q_heads - 1};
            v[static_cast<size_t>(IndexVar::KvHead)] = {0, x.kv_heads - 1};
            v[static_cast<size_t>(IndexVar::QIdx)] = {0, x.q_len - 1};
            v[static_cast<size_t>(IndexVar::KvIdx)] = {0, x.kv_len - 1};
            v[static_cast<size_t>(IndexVar::QLen)] = {x.q_len, x.q_len};
            v[static_cast<size_t>(IndexVar::KvLen)] = {x.kv_len, x.kv_len};
        } else {
            v = domain(d.parent);  // a copy: every bound below reads the parent's ranges
            for (const auto& n : d.narrowings) {
                const Range bound = formula(n.bound);
                if (bound.opaque) continue;
                auto& r = v[static_cast<size_t>(n.var)];
                r = interval::narrow(r, n.op, bound.r);
            }
        }
        memo = v;
        return *memo;
    }

    Range formula(int id) {
        auto& memo = formulas_[static_cast<size_t>(id)];
        if (!memo) memo = compute(p_.formulas[static_cast<size_t>(id)]);
        return *memo;
    }

    // Int arithmetic, which the GPU does in int32.
    static Range checked(IntInterval r, bool opaque, const BoundsProgram::Formula& f) {
        if (opaque) return kOpaque;
        user_check(r.lo >= kIntMin && r.hi <= kIntMax)
            << "index expression " << f.text << " ranges over [" << r.lo << ", " << r.hi
            << "] for these inputs, beyond int32, where the GPU computes it; index arithmetic must stay "
               "within int32 (split the tensor or use a smaller shape)";
        return {r, false};
    }

    Range compute(const BoundsProgram::Formula& f) {
        switch (f.op) {
        case FOp::Const: return {{f.value, f.value}};
        case FOp::Var: return {domain(f.domain)[static_cast<size_t>(f.var)]};
        case FOp::Scalar: {
            auto it = n_.scalars.find(f.text);
            internal_check(it != n_.scalars.end()) << "scalar " << f.text << " was checked present";
            const auto v = static_cast<long long>(it->second);
            return {{v, v}};
        }
        case FOp::Opaque: return kOpaque;
        case FOp::Neg: {
            const Range a = formula(f.a);
            return checked(interval::neg(a.r), a.opaque, f);
        }
        case FOp::Abs: {
            const Range a = formula(f.a);
            return checked(interval::abs(a.r), a.opaque, f);
        }
        case FOp::Select: {
            const bool t_empty = empty(domain(f.domain)), f_empty = empty(domain(f.else_domain));
            if (t_empty) return formula(f.b);
            if (f_empty) return formula(f.a);
            const Range t = formula(f.a), e = formula(f.b);
            return {interval::hull(t.r, e.r), t.opaque || e.opaque};
        }
        default: break;
        }
        const Range x = formula(f.a), y = formula(f.b);
        const bool opaque = x.opaque || y.opaque;
        const bool divisor_known = !y.opaque && y.r.lo == y.r.hi && y.r.lo != 0;
        switch (f.op) {
        case FOp::Add: return checked(interval::add(x.r, y.r), opaque, f);
        case FOp::Sub: return checked(interval::sub(x.r, y.r), opaque, f);
        case FOp::Mul: return checked(interval::mul(x.r, y.r), opaque, f);
        // min/max bound even an opaque side: clamp(doc[b, j], 0, 9) is in [0, 9].
        case FOp::Min: return {interval::min(x.r, y.r), x.opaque && y.opaque};
        case FOp::Max: return {interval::max(x.r, y.r), x.opaque && y.opaque};
        case FOp::Div:
            if (!divisor_known) return kOpaque;
            return checked(interval::div_by_const(x.r, y.r.lo), x.opaque, f);
        case FOp::Mod: {
            if (!divisor_known) return kOpaque;
            if (x.opaque) {  // C: the sign follows the dividend, the magnitude is below |y|
                const long long m = (y.r.lo < 0 ? -y.r.lo : y.r.lo) - 1;
                return {{-m, m}};
            }
            return {interval::mod_by_const(x.r, y.r.lo)};
        }
        default: break;
        }
        internal_error << "bounds check: formula op " << static_cast<int>(f.op) << " has no rule";
        return kOpaque;
    }

    const BoundsProgram& p_;
    const LaunchNumbers& n_;
    std::vector<std::optional<Range>> formulas_;
    std::vector<std::optional<Vars>> domains_;
};

}  // namespace

void check_tensor_reads(const BoundsProgram& program, const LaunchNumbers& numbers) {
    Evaluator(program, numbers).run();
}

}  // namespace attnjit::codegen
