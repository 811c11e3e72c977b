#include "dsl/vars.h"

#include <cctype>

#include "dsl/printer.h"
#include "support/error.h"

namespace attnjit::dsl {

Expr score() { return Var::make(VarKind::Score); }
Expr batch() { return Var::make(VarKind::Batch); }
Expr head() { return Var::make(VarKind::Head); }
Expr kv_head() { return Var::make(VarKind::KvHead); }
Expr q_idx() { return Var::make(VarKind::QIdx); }
Expr kv_idx() { return Var::make(VarKind::KvIdx); }
Expr q_len() { return Var::make(VarKind::QLen); }
Expr kv_len() { return Var::make(VarKind::KvLen); }

bool is_valid_user_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
    for (char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    static const char* reserved[] = {"score", "b", "h", "kv_head", "q_idx", "kv_idx", "q_len", "kv_len",
                                     "inf", "nan", "true", "false", "select", "min", "max", "pow",
                                     "float", "int", "bool", "p", "args"};
    for (const char* r : reserved)
        if (name == r) return false;
    for (int op = 0; op <= static_cast<int>(UnaryOp::Cos); ++op)
        if (name == unary_name(static_cast<UnaryOp>(op))) return false;
    return name.rfind("attnjit", 0) != 0 && name.rfind("__", 0) != 0;
}

static void check_name(const std::string& name, const char* what) {
    user_check(is_valid_user_name(name))
        << what << " name '" << name
        << "' is not usable: names must be C identifiers of at most 64 characters, must not start "
           "with '__' or 'attnjit', and must not be a built-in name (score, b, h, kv_head, q_idx, "
           "kv_idx, q_len, kv_len) or a function name; pick another name";
}

Expr scalar(const std::string& name) {
    check_name(name, "scalar");
    return ScalarParam::make(name, Type::Float);
}

Expr int_scalar(const std::string& name) {
    check_name(name, "scalar");
    return ScalarParam::make(name, Type::Int);
}

Tensor::Tensor(std::string name, DType dtype, int rank) : name_(std::move(name)), dtype_(dtype), rank_(rank) {
    check_name(name_, "tensor");
    user_check(rank >= 1 && rank <= 6) << "tensor '" << name_ << "' has rank " << rank
                                       << "; captured tensors have rank 1 to 6";
}

Expr Tensor::operator()(const std::vector<Expr>& indices) const {
    user_check(static_cast<int>(indices.size()) == rank_)
        << "tensor '" << name_ << "' has rank " << rank_ << " but was indexed with " << indices.size()
        << " indices; pass one index per dimension (use 0 for a broadcast dimension)";
    for (size_t i = 0; i < indices.size(); ++i) {
        user_check(indices[i].defined()) << "tensor '" << name_ << "': index " << i << " is undefined";
        user_check(indices[i].type() == Type::Int)
            << "tensor '" << name_ << "': index " << i << " (" << indices[i] << ") is "
            << indices[i].type() << "; indices must be int (use to_int(x) to convert a float)";
    }
    return check_expr_limits(TensorLoad::make(name_, dtype_, indices));
}

}  // namespace attnjit::dsl
