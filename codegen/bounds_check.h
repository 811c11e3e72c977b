// bounds_check: runs a BoundsProgram (bounds_analysis.h) with one launch's numbers.
// Pure C++ on numbers: no IR, no CUDA; runtime's argument check calls it before every
// launch, after it has checked that every scalar and tensor is present and well formed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codegen/bounds_program.h"

namespace attnjit::codegen {

// The sizes of one launch: B, Hq, Hkv, Nq, Nk.
struct LaunchExtents {
    int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0;
};

// A captured tensor as the bounds see it: elements per dimension, and element strides
// (stride 0 broadcasts: every index reads the same element).
struct TensorExtent {
    std::vector<int64_t> shape, strides;
};

struct LaunchNumbers {
    LaunchExtents extents;
    std::map<std::string, double> scalars;        // every runtime scalar the program reads
    std::map<std::string, TensorExtent> tensors;  // every captured tensor it reads
};

// Throws UserError naming the tensor, the index, its range and the fix when a read could
// leave its tensor, or when index arithmetic could overflow int32. Reads nothing when
// B or Nq is 0. A scalar or tensor missing from `numbers` is an internal error (the
// caller checks presence first).
void check_tensor_reads(const BoundsProgram& program, const LaunchNumbers& numbers);

}  // namespace attnjit::codegen
