#include "codegen/mask_analysis.h"

#include <cctype>
#include <optional>
#include <set>

#include "codegen/cuda_emitter.h"
#include "codegen/interval_rules.h"
#include "support/int_arith.h"
#include "dsl/printer.h"
#include "support/error.h"

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

    CodeDomain(const Bindings& bindings) : bindings_(bindings) {}

    void note(const dsl::Expr& e) {
        note_ = dsl::to_string(inline_bindings(e, bindings_));
        ++group_;
    }

    // The statements that `result` (the return logic's text) reads, directly or through
    // other statements, in emission order; each note's DSL comment goes above the first
    // kept statement of its group. The numbering of the kept locals is left as emitted.
    std::vector<std::string> live_lines(const std::string& result) const {
        std::set<std::string> used = identifiers(result);
        std::vector<bool> keep(stmts_.size(), false);
        for (size_t i = stmts_.size(); i-- > 0;) {
            if (!used.count(stmts_[i].name)) continue;
            keep[i] = true;
            for (const auto& id : identifiers(stmts_[i].rhs)) used.insert(id);
        }
        std::vector<std::string> lines;
        int printed_group = -1;
        for (size_t i = 0; i < stmts_.size(); ++i) {
            if (!keep[i]) continue;
            const Stmt& st = stmts_[i];
            if (st.group != printed_group && !st.note.empty()) lines.push_back("// " + st.note);
            printed_group = st.group;
            lines.push_back(st.decl + " " + st.name + " = " + st.rhs + ";");
        }
        return lines;
    }

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
        return {emit("const float", "f", "attnjit::to_float(p." + tensor_field(l.name) + ".ptr[" + offset(l, idx) + "])")};
    }
    std::pair<V, V> load_int_range(const dsl::TensorLoad& l, const std::vector<V>& idx, int dim, V first, V last) {
        std::string name = emit("const attnjit::IntRange", "range", range_call("int_range", l, idx, dim, first, last));
        return {V{name + ".lo", std::nullopt, true}, V{name + ".hi", std::nullopt, true}};
    }
    std::pair<F, F> load_float_range(const dsl::TensorLoad& l, const std::vector<V>& idx, int dim, V first, V last) {
        std::string name = emit("const attnjit::FloatRange", "range", range_call("float_range", l, idx, dim, first, last));
        return {F{name + ".lo"}, F{name + ".hi"}};
    }

    V add(const V& a, const V& b) {
        if (a.k && b.k) return int_const(int_arith::saturating_add(*a.k, *b.k));
        if (b.k && *b.k == 0) return a;
        if (a.k && *a.k == 0) return b;
        return arith(a, "+", b);
    }
    V sub(const V& a, const V& b) {
        if (a.k && b.k) return int_const(int_arith::saturating_sub(*a.k, *b.k));
        if (b.k && *b.k == 0) return a;
        return arith(a, "-", b);
    }
    V mul(const V& a, const V& b) {
        if (a.k && b.k) return int_const(int_arith::saturating_mul(*a.k, *b.k));
        if (b.k && *b.k == 1) return a;
        return arith(a, "*", b);
    }
    V div(const V& a, const V& b) {
        if (a.k && b.k && *b.k != 0) return int_const(int_arith::saturating_div(*a.k, *b.k));
        if (b.k && *b.k == 1) return a;
        return arith(a, "/", b);
    }
    V neg(const V& a) {
        if (a.k) return int_const(int_arith::saturating_neg(*a.k));
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
    // `<decl> <name> = <rhs>;` under the current note.
    struct Stmt {
        std::string decl, name, rhs, note;
        int group;
    };

    // Declares a new local <prefix><n> = rhs and returns its name.
    std::string emit(const std::string& decl, const char* prefix, const std::string& rhs) {
        std::string name = prefix + std::to_string(next_++);
        stmts_.push_back(Stmt{decl, name, rhs, note_, group_});
        return name;
    }

    // The C identifiers in `text` (member names after '.' included; they never collide
    // with the locals, which are the only names looked up).
    static std::set<std::string> identifiers(const std::string& text) {
        std::set<std::string> ids;
        for (size_t i = 0; i < text.size();) {
            const unsigned char c = static_cast<unsigned char>(text[i]);
            if (std::isalpha(c) || c == '_') {
                size_t j = i;
                while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
                ids.insert(text.substr(i, j - i));
                i = j;
            } else if (std::isdigit(c)) {
                while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
            } else {
                ++i;
            }
        }
        return ids;
    }
    std::string widened(const V& a) { return a.wide ? a.text : "(long long)" + a.text; }
    V arith(const V& a, const char* op, const V& b) {
        // One operand in long long makes the whole operation 64-bit.
        std::string lhs = a.wide || b.wide ? a.text : widened(a);
        return local_int(lhs + " " + op + " " + b.text);
    }
    V local_int(const std::string& rhs) { return {emit("const long long", "i", rhs), std::nullopt, true}; }
    P local_bool(const std::string& rhs) { return {emit("const bool", "b", rhs), std::nullopt}; }
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
               std::to_string(dim) + "], " + first.text + ", " + last.text + ")";
    }

    const Bindings& bindings_;
    std::vector<Stmt> stmts_;
    std::string note_;
    int group_ = 0;
    int next_ = 0;
};

}  // namespace

ClassifyCode mask_analysis(const dsl::Expr& mask, const Bindings& bindings) {
    ClassifyCode out;
    if (!mask.defined()) {
        out.lines.push_back("return attnjit::TileClass::kFull;  // no mask");
        return out;
    }
    CodeDomain d(bindings);
    detail::IntervalRules<CodeDomain> rules(d, bindings);
    auto tri = rules.boolean(mask);
    out.can_classify = !(tri.may_true.k == true && tri.may_false.k == true);
    if (!out.can_classify) {
        out.lines.push_back("return attnjit::TileClass::kPartial;  // nothing is known about the mask over a tile");
        return out;
    }
    // The return logic first; then only the statements it reads go above it.
    std::vector<std::string> returns;
    if (tri.may_true.k != true) {
        returns.push_back(tri.may_true.k ? "return attnjit::TileClass::kSkip;"
                                         : "if (!" + tri.may_true.text + ") return attnjit::TileClass::kSkip;");
    }
    if (!tri.may_true.k.has_value() || *tri.may_true.k) {  // kSkip is not certain
        if (tri.may_false.k != true) {
            returns.push_back(tri.may_false.k ? "return attnjit::TileClass::kFull;"
                                              : "if (!" + tri.may_false.text + ") return attnjit::TileClass::kFull;");
        }
        if (tri.may_false.k != false) returns.push_back("return attnjit::TileClass::kPartial;");
    }
    std::string read;
    for (const auto& r : returns) read += r + "\n";
    out.lines = d.live_lines(read);
    for (const auto& l : out.lines)
        if (l.find("ctx.") != std::string::npos) out.reads_memory = true;
    out.lines.insert(out.lines.end(), returns.begin(), returns.end());
    return out;
}

}  // namespace attnjit::codegen
