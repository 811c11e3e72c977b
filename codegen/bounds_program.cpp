#include "codegen/bounds_program.h"

namespace attnjit::codegen {

const char* index_var_name(IndexVar v) {
    switch (v) {
    case IndexVar::Batch: return "b";
    case IndexVar::Head: return "h";
    case IndexVar::KvHead: return "kv_head";
    case IndexVar::QIdx: return "q_idx";
    case IndexVar::KvIdx: return "kv_idx";
    case IndexVar::QLen: return "q_len";
    case IndexVar::KvLen: return "kv_len";
    }
    return "?";
}

namespace {

const char* op_name(BoundsProgram::Op op) {
    using Op = BoundsProgram::Op;
    switch (op) {
    case Op::Const: return "const";
    case Op::Var: return "var";
    case Op::Scalar: return "scalar";
    case Op::Opaque: return "opaque";
    case Op::Neg: return "neg";
    case Op::Abs: return "abs";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Mod: return "mod";
    case Op::Min: return "min";
    case Op::Max: return "max";
    case Op::Select: return "select";
    }
    return "?";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const BoundsProgram& p) {
    using Op = BoundsProgram::Op;
    for (size_t i = 1; i < p.domains.size(); ++i) {
        os << "    d" << i << " = d" << p.domains[i].parent;
        for (const auto& n : p.domains[i].narrowings)
            os << " & " << index_var_name(n.var) << " " << interval::cmp_name(n.op) << " f" << n.bound;
        os << "\n";
    }
    for (size_t i = 0; i < p.formulas.size(); ++i) {
        const auto& f = p.formulas[i];
        os << "    f" << i << " = " << op_name(f.op);
        switch (f.op) {
        case Op::Const: os << " " << f.value; break;
        case Op::Var: os << " " << index_var_name(f.var) << " in d" << f.domain; break;
        case Op::Scalar: os << " " << f.text; break;
        case Op::Opaque: break;
        case Op::Select:
            os << " f" << f.a << " in d" << f.domain << ", f" << f.b << " in d" << f.else_domain;
            break;
        default:
            os << " f" << f.a;
            if (f.b >= 0) os << ", f" << f.b;
            break;
        }
        os << "\n";
    }
    for (size_t i = 0; i < p.steps.size(); ++i) {
        const auto& s = p.steps[i];
        os << "    " << i << ": ";
        if (s.kind == BoundsProgram::Step::Kind::Enter)
            os << "enter d" << s.domain << " (empty: skip to " << s.skip_to << ")";
        else
            os << "read " << s.tensor << " dim " << s.dim << " at f" << s.formula << " (" << s.index << ")";
        os << "\n";
    }
    return os;
}

}  // namespace attnjit::codegen
