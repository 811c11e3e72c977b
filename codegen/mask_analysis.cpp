#include "codegen/mask_analysis.h"

#include <optional>

#include "codegen/cuda_emitter.h"
#include "codegen/interval_rules.h"
#include "dsl/printer.h"

namespace attnjit::codegen {
namespace {

// A scalar domain whose values are C expressions; every operation on unknown values
// becomes one `const` local, and operations on known constants fold.
class CodeDomain {
public:
    static constexpr bool kHeadTempsArePoints = true;

    struct V {
        V() = default;
        V(std::string t, std::optional<long long> known = std::nullopt, bool w = false)
            : text(std::move(t)), k(known), wide(w) {}
        std::string text;
        std::optional<long long> k;  // known at codegen time
        bool wide = false;           // already long long
    };
    struct F {
        std::string text;
    };
    struct P {
        P() = default;
        P(std::string t, std::optional<bool> known = std::nullopt) : text(std::move(t)), k(known) {}
        std::string text;
        std::optional<bool> k;
    };

    CodeDomain(std::vector<std::string>& lines, const Bindings& bindings) : lines_(lines), bindings_(bindings) {}

    void note(const dsl::Expr& e) { pending_ = dsl::to_string(inline_bindings(e, bindings_)); }

    V int_const(long long v) {
        std::string t = std::to_string(v);
        if (v < INT32_MIN || v > INT32_MAX) t += "LL";
        return {v < 0 ? "(" + t + ")" : t, v, true};
    }
    F float_const(double v) { return {float_literal_cuda(v)}; }
    P bool_const(bool b) { return {b ? "true" : "false", b}; }

    V q0() { return {"q0"}; }
    V q1() { return {"q1"}; }
    V k0() { return {"k0"}; }
    V k1() { return {"k1"}; }
    V var(dsl::VarKind v) {
        switch (v) {
        case dsl::VarKind::Batch: return {"hd.b"};
        case dsl::VarKind::Head: return {"hd.h"};
        case dsl::VarKind::KvHead: return {"hd.kvh"};
        case dsl::VarKind::QLen: return {"p.args.q_len"};
        case dsl::VarKind::KvLen: return {"p.args.kv_len"};
        default: break;
        }
        internal_error << "mask analysis: variable " << dsl::var_name(v) << " is not a point";
        return {};
    }
    V int_scalar(const std::string& n) { return {"p." + scalar_field(n)}; }
    F float_scalar(const std::string& n) { return {"p." + scalar_field(n)}; }
    V temp_int(const std::string& n) { return {"hd." + n}; }
    F temp_float(const std::string& n) { return {"hd." + n}; }
    P temp_bool(const std::string& n) { return {"hd." + n}; }

    V load_int(const dsl::TensorLoad& l, const std::vector<V>& idx) {
        return local_int("attnjit::to_int(p." + tensor_field(l.name) + ".ptr[" + offset(l, idx) + "])");
    }
    F load_float(const dsl::TensorLoad& l, const std::vector<V>& idx) {
        std::string name = "f" + std::to_string(next_++);
        emit("const float " + name + " = attnjit::to_float(p." + tensor_field(l.name) + ".ptr[" + offset(l, idx) + "]);");
        return {name};
    }
    std::pair<V, V> load_int_range(const dsl::TensorLoad& l, const std::vector<V>& idx, int dim, V first, V last) {
        std::string name = "range" + std::to_string(next_++);
        emit("const attnjit::IntRange " + name + " = " + range_call("int_range", l, idx, dim, first, last));
        return {V{name + ".lo", std::nullopt, true}, V{name + ".hi", std::nullopt, true}};
    }
    std::pair<F, F> load_float_range(const dsl::TensorLoad& l, const std::vector<V>& idx, int dim, V first, V last) {
        std::string name = "range" + std::to_string(next_++);
        emit("const attnjit::FloatRange " + name + " = " + range_call("float_range", l, idx, dim, first, last));
        return {F{name + ".lo"}, F{name + ".hi"}};
    }

    V add(const V& a, const V& b) {
        if (a.k && b.k) return int_const(*a.k + *b.k);
        if (b.k && *b.k == 0) return a;
        if (a.k && *a.k == 0) return b;
        return arith(a, "+", b);
    }
    V sub(const V& a, const V& b) {
        if (a.k && b.k) return int_const(*a.k - *b.k);
        if (b.k && *b.k == 0) return a;
        return arith(a, "-", b);
    }
    V mul(const V& a, const V& b) {
        if (a.k && b.k) return int_const(*a.k * *b.k);
        if (b.k && *b.k == 1) return a;
        return arith(a, "*", b);
    }
    V div(const V& a, const V& b) {
        if (a.k && b.k && *b.k != 0) return int_const(*a.k / *b.k);
        if (b.k && *b.k == 1) return a;
        return arith(a, "/", b);
    }
    V neg(const V& a) {
        if (a.k) return int_const(-*a.k);
        return local_int("-" + widened(a));
    }
    V min(const V& a, const V& b) {
        if (a.k && b.k) return int_const(*a.k < *b.k ? *a.k : *b.k);
        return local_int(a.text + " < " + b.text + " ? " + widened(a) + " : " + widened(b));
    }
    V max(const V& a, const V& b) {
        if (a.k && b.k) return int_const(*a.k > *b.k ? *a.k : *b.k);
        return local_int(a.text + " > " + b.text + " ? " + widened(a) + " : " + widened(b));
    }
    V select(const P& c, const V& a, const V& b) {
        if (c.k) return *c.k ? a : b;
        if (a.k && b.k && *a.k == *b.k) return a;
        return local_int(c.text + " ? " + widened(a) + " : " + widened(b));
    }
    F to_float(const V& a) { return {"(float)" + a.text}; }
    F fneg(const F& a) { return {"-(" + a.text + ")"}; }

    P lt(const V& a, const V& b) {
        if (a.k && b.k) return bool_const(*a.k < *b.k);
        return local_bool(a.text + " < " + b.text);
    }
    P le(const V& a, const V& b) {
        if (a.k && b.k) return bool_const(*a.k <= *b.k);
        return local_bool(a.text + " <= " + b.text);
    }
    P eq(const V& a, const V& b) {
        if (a.k && b.k) return bool_const(*a.k == *b.k);
        if (a.text == b.text) return bool_const(true);
        return local_bool(a.text + " == " + b.text);
    }
    P flt(const F& a, const F& b) { return local_bool(a.text + " < " + b.text); }
    P fle(const F& a, const F& b) { return local_bool(a.text + " <= " + b.text); }
    P and_(const P& a, const P& b) {
        if ((a.k && !*a.k) || (b.k && !*b.k)) return bool_const(false);
        if (a.k) return b;
        if (b.k) return a;
        return local_bool(a.text + " && " + b.text);
    }
    P or_(const P& a, const P& b) {
        if ((a.k && *a.k) || (b.k && *b.k)) return bool_const(true);
        if (a.k) return b;
        if (b.k) return a;
        return local_bool(a.text + " || " + b.text);
    }
    P not_(const P& a) {
        if (a.k) return bool_const(!*a.k);
        return local_bool("!" + a.text);
    }

private:
    void emit(const std::string& line) {
        if (!pending_.empty()) lines_.push_back("// " + pending_);
        pending_.clear();
        lines_.push_back(line);
    }
    std::string widened(const V& a) { return a.wide ? a.text : "(long long)" + a.text; }
    V arith(const V& a, const char* op, const V& b) {
        // One operand in long long makes the whole operation 64-bit.
        std::string lhs = a.wide || b.wide ? a.text : widened(a);
        return local_int(lhs + " " + op + " " + b.text);
    }
    V local_int(const std::string& rhs) {
        std::string name = "i" + std::to_string(next_++);
        emit("const long long " + name + " = " + rhs + ";");
        return {name, std::nullopt, true};
    }
    P local_bool(const std::string& rhs) {
        std::string name = "b" + std::to_string(next_++);
        emit("const bool " + name + " = " + rhs + ";");
        return {name, std::nullopt};
    }
    std::string offset(const dsl::TensorLoad& l, const std::vector<V>& idx) {
        std::vector<std::string> texts;
        for (const auto& v : idx) texts.push_back(v.text);
        return tensor_offset(l.name, texts);
    }
    std::string range_call(const char* fn, const dsl::TensorLoad& l, const std::vector<V>& idx, int dim,
                           const V& first, const V& last) {
        std::string off = offset(l, idx);
        std::string base = "p." + tensor_field(l.name) + ".ptr" + (off == "0" ? "" : " + " + off);
        return std::string("ctx.") + fn + "(" + base + ", p." + tensor_field(l.name) + ".stride[" +
               std::to_string(dim) + "], " + first.text + ", " + last.text + ");";
    }

    std::vector<std::string>& lines_;
    const Bindings& bindings_;
    std::string pending_;
    int next_ = 0;
};

}  // namespace

ClassifyCode mask_analysis(const dsl::Expr& mask, const Bindings& bindings) {
    ClassifyCode out;
    if (!mask.defined()) {
        out.lines.push_back("return attnjit::TileClass::kFull;  // no mask");
        return out;
    }
    CodeDomain d(out.lines, bindings);
    detail::IntervalRules<CodeDomain> rules(d, bindings);
    auto tri = rules.boolean(mask);
    out.can_classify = !(tri.may_true.k == true && tri.may_false.k == true);
    if (!out.can_classify) {
        out.lines.clear();
        out.lines.push_back("return attnjit::TileClass::kPartial;  // nothing is known about the mask over a tile");
        return out;
    }
    if (tri.may_true.k != true) {
        out.lines.push_back(tri.may_true.k ? "return attnjit::TileClass::kSkip;"
                                           : "if (!" + tri.may_true.text + ") return attnjit::TileClass::kSkip;");
        if (tri.may_true.k) return out;
    }
    if (tri.may_false.k != true) {
        out.lines.push_back(tri.may_false.k ? "return attnjit::TileClass::kFull;"
                                            : "if (!" + tri.may_false.text + ") return attnjit::TileClass::kFull;");
        if (tri.may_false.k) return out;
    }
    out.lines.push_back("return attnjit::TileClass::kPartial;");
    return out;
}

}  // namespace attnjit::codegen
