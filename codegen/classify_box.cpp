#include "codegen/classify_box.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "codegen/interval_core.h"
#include "codegen/interval_rules.h"
#include "codegen/kernel_plan.h"
#include "support/error.h"

namespace attnjit::codegen {


namespace {

// A scalar domain of plain numbers: ints as long long with interval_core's int64
// arithmetic (what the bounds evaluator uses too), floats as fp32 like the device.
class HostDomain : public interval::Int64Arith {
public:
    static constexpr bool kHeadTempsArePoints = false;  // analysed through their bindings
    using F = float;

    HostDomain(const Box& box, const HostEnv& env) : box_(box), env_(env) {}

    void note(const dsl::Expr&) {}
    F float_const(double v) { return static_cast<float>(v); }
    P bool_const(bool b) { return b; }
    V q0() { return box_.q0; }
    V q1() { return box_.q1; }
    V k0() { return box_.k0; }
    V k1() { return box_.k1; }
    V var(dsl::VarKind v) {
        switch (v) {
        case dsl::VarKind::Batch: return env_.b;
        case dsl::VarKind::Head: return env_.h;
        case dsl::VarKind::KvHead: return env_.kv_head;
        case dsl::VarKind::QLen: return env_.q_len;
        case dsl::VarKind::KvLen: return env_.kv_len;
        default: break;
        }
        internal_error << "classify_box: variable " << dsl::var_name(v) << " is not a point";
        return 0;
    }
    V int_scalar(const std::string& n) { return static_cast<long long>(scalar(n)); }
    F float_scalar(const std::string& n) { return static_cast<float>(scalar(n)); }
    V temp_int(const std::string&) { return unreachable<V>(); }
    F temp_float(const std::string&) { return unreachable<F>(); }
    P temp_bool(const std::string&) { return unreachable<P>(); }

    V load_int(const dsl::TensorLoad& l, const std::vector<V>& idx) { return to_int(element(l, idx, -1, 0)); }
    F load_float(const dsl::TensorLoad& l, const std::vector<V>& idx) {
        return static_cast<float>(element(l, idx, -1, 0));
    }
    std::pair<V, V> load_int_range(const dsl::TensorLoad& l, const std::vector<V>& idx, int dim, V first, V last) {
        long long lo = std::numeric_limits<long long>::max(), hi = -lo;
        for (long long i = first; i <= last; ++i) {
            long long v = to_int(element(l, idx, dim, i));
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        return {lo, hi};
    }
    std::pair<F, F> load_float_range(const dsl::TensorLoad& l, const std::vector<V>& idx, int dim, V first, V last) {
        float lo = std::numeric_limits<float>::infinity(), hi = -lo;
        for (long long i = first; i <= last; ++i) {
            float v = static_cast<float>(element(l, idx, dim, i));
            lo = v < lo ? v : lo;  // NaN ignored, as on the device
            hi = v > hi ? v : hi;
        }
        return {lo, hi};
    }

    F to_float(V a) { return static_cast<float>(a); }
    F fneg(F a) { return -a; }
    P flt(F a, F b) { return a < b; }
    P fle(F a, F b) { return a <= b; }
    P and_(P a, P b) { return a && b; }
    P or_(P a, P b) { return a || b; }
    P not_(P a) { return !a; }

private:
    template <class T>
    static T unreachable() {
        internal_error << "classify_box: head temporaries are analysed through their bindings";
        return T();
    }
    double scalar(const std::string& n) const {
        auto it = env_.scalars.find(n);
        user_check(it != env_.scalars.end()) << "classify_box: no value for scalar '" << n << "' in HostEnv";
        return it->second;
    }
    // An int element is read as int32, an i64 one truncated like a C cast, by every
    // reader: the device's to_int (point loads and ctx.int_range) and dsl::interpret.
    static long long to_int(double v) {
        return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(static_cast<long long>(v))));
    }
    double element(const dsl::TensorLoad& l, const std::vector<V>& idx, int dim, long long i) const {
        auto it = env_.tensors.find(l.name);
        user_check(it != env_.tensors.end()) << "classify_box: no data for tensor '" << l.name << "' in HostEnv";
        const HostTensor& t = it->second;
        user_check(t.strides.size() == idx.size()) << "classify_box: tensor '" << l.name << "' has "
                                                    << t.strides.size() << " strides, the mask indexes "
                                                    << idx.size() << " dimensions";
        long long off = 0;
        for (size_t d = 0; d < idx.size(); ++d) off += (static_cast<int>(d) == dim ? i : idx[d]) * t.strides[d];
        user_check(off >= 0 && off < static_cast<long long>(t.data.size()))
            << "classify_box: element " << off << " of tensor '" << l.name << "' is out of bounds";
        return t.data[off];
    }

    Box box_;
    const HostEnv& env_;
};

}  // namespace

TileClass classify_box(const dsl::Expr& mask, const Box& box, const HostEnv& env, const Bindings& bindings) {
    if (!mask.defined()) return TileClass::kFull;
    HostDomain d(box, env);
    detail::IntervalRules<HostDomain> rules(d, bindings);
    auto tri = rules.boolean(mask);
    if (!tri.may_true) return TileClass::kSkip;
    if (!tri.may_false) return TileClass::kFull;
    return TileClass::kPartial;
}

TileClass classify_box(const KernelPlan& plan, const Box& box, const HostEnv& env) {
    if (!plan.mask.defined()) return TileClass::kFull;
    if (!plan.classify.can_classify) return TileClass::kPartial;
    return classify_box(plan.mask, box, env, plan.all_bindings());
}

}  // namespace attnjit::codegen
