// The bytes of a generated Params struct (codegen/params_layout.h), for any kernel kind:
// the kind's argument block as given, then every runtime scalar and captured tensor by
// name, each at the offset the generator placed it. Arguments must be checked first
// (the attention layer's argument check): a missing name is an internal error here.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "codegen/params_layout.h"
#include "runtime/tensor_view.h"

namespace attnjit::runtime {

std::vector<unsigned char> pack_params(const codegen::ParamsLayout& layout, const void* args_block,
                                       size_t args_block_size, const std::map<std::string, double>& scalars,
                                       const std::map<std::string, TensorView>& tensors);

}  // namespace attnjit::runtime
