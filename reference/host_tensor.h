// Host tensors for the CPU reference and the tests: any dtype, any shape, any strides
// (in elements, 0 broadcasts, negative allowed) over one byte buffer. Values are stored
// in their dtype, so what a test writes is exactly what a kernel reads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "support/dtype.h"

namespace attnjit::reference {

// Round-to-nearest-even conversions. NaN stays NaN (quiet), overflow gives inf,
// fp16 subnormals are exact.
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

// The value x takes once stored as dtype (one correctly rounded step from double, no
// double rounding through fp32). Integer dtypes round to nearest and saturate.
double round_to_dtype(double x, DType dtype);

class HostTensor {
public:
    HostTensor() = default;
    // Zero-filled, contiguous (row-major) when strides are empty. Storage covers every
    // element the strides can reach, plus `storage_offset` elements before the first.
    HostTensor(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
               int64_t storage_offset = 0);

    static std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

    DType dtype() const { return dtype_; }
    int rank() const { return static_cast<int>(shape_.size()); }
    const std::vector<int64_t>& shape() const { return shape_; }
    const std::vector<int64_t>& strides() const { return strides_; }
    int64_t size(int d) const { return shape_.at(d); }
    int64_t numel() const;
    // First element and the whole buffer (for copying to a device or a TensorView).
    void* data() { return bytes_.data() + offset_ * dtype_size(dtype_); }
    const void* data() const { return bytes_.data() + offset_ * dtype_size(dtype_); }
    std::vector<uint8_t>& storage() { return bytes_; }
    const std::vector<uint8_t>& storage() const { return bytes_; }
    int64_t storage_offset() const { return offset_; }

    // Element offset from data(), in elements. No bounds check.
    int64_t offset_of(const int64_t* index) const;
    // Element as a double (exact for every dtype except i64 beyond 2^53).
    double get(const int64_t* index) const;
    double get(std::initializer_list<int64_t> index) const { return get(index.begin()); }
    // Stores round_to_dtype(v). Writing through a stride-0 dimension writes the shared element.
    void set(const int64_t* index, double v);
    void set(std::initializer_list<int64_t> index, double v) { set(index.begin(), v); }
    uint64_t raw_bits(const int64_t* index) const;  // the stored bytes, zero-extended

    // Calls f(index) for every logical element, last dimension fastest.
    template <class F>
    void for_each_index(F&& f) const {
        if (numel() == 0) return;
        std::vector<int64_t> idx(shape_.size(), 0);
        for (;;) {
            f(idx.data());
            int d = rank() - 1;
            while (d >= 0 && ++idx[d] == shape_[d]) idx[d--] = 0;
            if (d < 0) return;
        }
    }

    std::string describe() const;  // "f16[2, 3, 4] strides [12, 4, 1]"

private:
    DType dtype_ = DType::f32;
    std::vector<int64_t> shape_, strides_;
    int64_t offset_ = 0;
    std::vector<uint8_t> bytes_;
};

// Seeded N(0, 1) * stddev + mean, each value rounded to the dtype (so the reference sees
// the same numbers as the kernel). Deterministic across platforms (own generator and
// Box-Muller; no std::normal_distribution).
void fill_normal(HostTensor& t, uint64_t seed, double mean = 0.0, double stddev = 1.0);
// Seeded integers uniform in [lo, hi] (u8: 0 or 1 when lo = 0, hi = 1).
void fill_uniform_int(HostTensor& t, uint64_t seed, int64_t lo, int64_t hi);
// Every element set to v (rounded).
void fill_value(HostTensor& t, double v);
// A contiguous copy with the same logical contents.
HostTensor materialize(const HostTensor& t);

// Poison: the pattern a test writes into outputs before a launch, so an element the
// kernel never wrote is told apart from one it wrote (even a NaN it computed, which is
// never this exact payload). A NaN with a recognisable payload.
uint64_t poison_bits(DType dtype);  // f16 0x7E5A, bf16 0x7FDA, f32 0x7FDADADA
void fill_poison(HostTensor& t);
bool is_poison(const HostTensor& t, const int64_t* index);

}  // namespace attnjit::reference
