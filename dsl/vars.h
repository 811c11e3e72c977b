// The names a score_mod or mask is written in: the score, the indices, runtime scalars
// and captured tensors.
#pragma once

#include <string>
#include <vector>

#include "dsl/ir.h"
#include "support/dtype.h"

namespace attnjit::dsl {

Expr score();    // s = scale * <q_i, k_j>, float. Only score_mod may read it.
Expr batch();    // b
Expr head();     // h, the query head
Expr kv_head();  // h / (Hq / Hkv)
Expr q_idx();    // i, the query position
Expr kv_idx();   // j, the key position
Expr q_len();    // Nq
Expr kv_len();   // Nk

// A runtime scalar, given by name at launch (float or int). Changing its value never
// recompiles.
Expr scalar(const std::string& name);
Expr int_scalar(const std::string& name);

// A captured tensor, given by name at launch. Elements are read through the strides the
// caller passes, so a stride of 0 broadcasts (e.g. one [1, H, N, N] bias for every batch).
class Tensor {
public:
    Tensor(std::string name, DType dtype, int rank);
    const std::string& name() const { return name_; }
    DType dtype() const { return dtype_; }
    int rank() const { return rank_; }

    Expr operator()(const std::vector<Expr>& indices) const;
    template <class... I>
    Expr operator()(const I&... i) const {
        return (*this)(std::vector<Expr>{Expr(i)...});
    }

private:
    std::string name_;
    DType dtype_;
    int rank_;
};

// True for a valid C identifier that is not one of the built-in names above.
bool is_valid_user_name(const std::string& name);

}  // namespace attnjit::dsl
