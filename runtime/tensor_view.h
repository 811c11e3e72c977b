// A non-owning view of a device tensor as the runtime API takes it: pointer, element
// type, and shape and strides in elements (not bytes), outermost dimension first.
// The launcher checks views against the spec before anything reaches the GPU.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "support/dtype.h"

namespace attnjit::runtime {

struct TensorView {
    void* data = nullptr;
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;  // elements; same length as shape

    int rank() const { return static_cast<int>(shape.size()); }
    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
    // Row-major strides for `shape`.
    static std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
        std::vector<int64_t> s(shape.size(), 1);
        for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
        return s;
    }
    static TensorView contiguous(void* data, DType dtype, std::vector<int64_t> shape) {
        auto strides = contiguous_strides(shape);
        return TensorView{data, dtype, std::move(shape), std::move(strides)};
    }
};

inline std::ostream& operator<<(std::ostream& os, const TensorView& t) {
    os << dtype_name(t.dtype) << "[";
    for (size_t i = 0; i < t.shape.size(); ++i) os << (i ? ", " : "") << t.shape[i];
    os << "] strides [";
    for (size_t i = 0; i < t.strides.size(); ++i) os << (i ? ", " : "") << t.strides[i];
    return os << "] at " << t.data;
}

}  // namespace attnjit::runtime
