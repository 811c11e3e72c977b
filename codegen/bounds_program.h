// BoundsProgram: what bounds_analysis (bounds_analysis.h) makes of a spec's reads of
// captured tensors, as plain data that needs no IR. For every read of every dimension:
// the index as an interval formula over a launch's numbers (B, Hq, Hkv, Nq, Nk, the
// runtime scalars by name), under the guards of its path. bounds_check.h evaluates it
// for one launch; runtime keeps one per spec and runs it before every launch.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "codegen/interval_core.h"

namespace attnjit::codegen {

// The built-in int variables an index may read (dsl::VarKind without the float score).
enum class IndexVar { Batch, Head, KvHead, QIdx, KvIdx, QLen, KvLen };
inline constexpr int kIndexVarCount = 7;
const char* index_var_name(IndexVar v);

struct BoundsProgram {
    // "var op bound": narrows var on a path where the comparison holds.
    struct Narrowing {
        IndexVar var;
        interval::Cmp op;
        int bound;  // a formula, evaluated in the parent domain
    };
    // The ranges of the variables on one path. Domain 0 is the whole launch (b in
    // [0, B-1], ..., q_len = Nq, kv_len = Nk); any other is its parent's, narrowed in order,
    // every bound read in the parent (both sides of i < j narrow against the parent's).
    struct Domain {
        int parent = -1;
        std::vector<Narrowing> narrowings;
    };

    // The range of an int subexpression. Overflow past int32 is a UserError (Neg..Div);
    // an Opaque range (a tensor element, a float) spares that check and is out of bounds
    // unless min/max or % bound it.
    enum class Op { Const, Var, Scalar, Opaque, Neg, Abs, Add, Sub, Mul, Div, Mod, Min, Max, Select };
    struct Formula {
        Op op = Op::Opaque;
        long long value = 0;  // Const
        IndexVar var{};       // Var
        int domain = 0;       // Var: where it is read; Select: the domain of its true side
        int else_domain = 0;  // Select: the domain of its false side
        std::string text;     // Scalar: the name; Neg..Div: the expression, for the message
        int a = -1, b = -1;   // operands (Select: the true and the false side)
    };

    // The program runs its steps in order. Enter evaluates a domain (its bounds may
    // overflow) and, when it is empty, skips to step `skip_to`: nothing on that path is
    // read. Read checks dimension `dim` of `tensor`, indexed by `index` (printed), whose
    // range is formula `formula`; a dimension of stride 0 broadcasts and is never checked.
    struct Step {
        enum class Kind { Enter, Read } kind = Kind::Read;
        int domain = 0, skip_to = 0;  // Enter
        std::string tensor, index;    // Read
        int dim = 0, formula = -1;    // Read
    };

    std::vector<Domain> domains{Domain{}};  // [0]: the launch
    std::vector<Formula> formulas;
    std::vector<Step> steps;

    bool reads_nothing() const { return steps.empty(); }
};

// One line per domain, formula and step (KernelPlan's printer, ATTNJIT_DEBUG=2).
std::ostream& operator<<(std::ostream& os, const BoundsProgram& p);

}  // namespace attnjit::codegen
