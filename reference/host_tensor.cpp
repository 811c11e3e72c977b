#include "reference/host_tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "support/error.h"

namespace attnjit::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Rounds x to a binary format with p significand bits (implicit bit included), minimum
// normal exponent emin and largest finite value max_finite; ties to even.
double round_binary(double x, int p, int emin, double max_finite) {
    if (!std::isfinite(x) || x == 0) return x;
    int e;
    std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
    double quantum = std::ldexp(1.0, std::max(e - 1, emin) - (p - 1));
    double r = std::nearbyint(x / quantum) * quantum;  // default rounding mode: to nearest even
    if (std::fabs(r) > max_finite) return std::copysign(kInf, x);
    return r;
}

constexpr double kHalfMax = 65504.0;
const double kBf16Max = std::ldexp(255.0, 120);  // (2 - 2^-7) * 2^127

double round_half(double x) { return round_binary(x, 11, -14, kHalfMax); }
double round_bf16(double x) { return round_binary(x, 8, -126, kBf16Max); }

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Uniform in (0, 1].
double uniform01(uint64_t& state) { return (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

uint16_t float_to_half_bits(float f) {
    uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (std::isnan(f)) return sign | 0x7E00;
    double r = std::fabs(round_half(f));
    if (std::isinf(r)) return sign | 0x7C00;
    if (r < 0x1.0p-14) return sign | static_cast<uint16_t>(r * 0x1.0p24);  // subnormal (or zero): exact
    int e;
    double m = std::frexp(r, &e);  // r = m * 2^e, m in [0.5, 1)
    int exponent = e - 1 + 15;
    uint16_t mant = static_cast<uint16_t>((m * 2.0 - 1.0) * 1024.0);
    return sign | static_cast<uint16_t>(exponent << 10) | mant;
}

float half_bits_to_float(uint16_t h) {
    float sign = (h & 0x8000) ? -1.0f : 1.0f;
    int exponent = (h >> 10) & 0x1F;
    int mant = h & 0x3FF;
    if (exponent == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
    if (exponent == 31) return mant ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
    return sign * std::ldexp(static_cast<float>(1024 + mant), exponent - 25);
}

uint16_t float_to_bf16_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x0040);  // keep it quiet
    u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even; carries into the exponent (-> inf)
    return static_cast<uint16_t>(u >> 16);
}

float bf16_bits_to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

double round_to_dtype(double x, DType dtype) {
    switch (dtype) {
    case DType::f16: return round_half(x);
    case DType::bf16: return round_bf16(x);
    case DType::f32: return static_cast<double>(static_cast<float>(x));
    case DType::i32:
        return std::isnan(x) ? 0 : std::clamp(std::nearbyint(x), -2147483648.0, 2147483647.0);
    case DType::i64:
        return std::isnan(x) ? 0 : std::clamp(std::nearbyint(x), -9223372036854775808.0, 9223372036854774784.0);
    case DType::u8: return std::isnan(x) ? 0 : std::clamp(std::nearbyint(x), 0.0, 255.0);
    }
    return x;
}

std::vector<int64_t> HostTensor::contiguous_strides(const std::vector<int64_t>& shape) {
    std::vector<int64_t> s(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * std::max<int64_t>(shape[d + 1], 1);
    return s;
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                       int64_t storage_offset)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)) {
    if (strides_.empty()) strides_ = contiguous_strides(shape_);
    user_check(strides_.size() == shape_.size())
        << "HostTensor: " << shape_.size() << " dims but " << strides_.size() << " strides";
    user_check(storage_offset >= 0) << "HostTensor: negative storage offset";
    int64_t lo = 0, hi = 0;
    bool empty = false;
    for (size_t d = 0; d < shape_.size(); ++d) {
        user_check(shape_[d] >= 0) << "HostTensor: negative extent " << shape_[d] << " in dim " << d;
        if (shape_[d] == 0) empty = true;
        int64_t span = (shape_[d] - 1) * strides_[d];
        (span < 0 ? lo : hi) += span;
    }
    offset_ = storage_offset - lo;
    int64_t elements = empty ? offset_ : offset_ + hi + 1;
    bytes_.assign(static_cast<size_t>(elements) * dtype_size(dtype_), 0);
}

int64_t HostTensor::numel() const {
    int64_t n = 1;
    for (int64_t s : shape_) n *= s;
    return n;
}

int64_t HostTensor::offset_of(const int64_t* index) const {
    int64_t off = 0;
    for (size_t d = 0; d < shape_.size(); ++d) off += index[d] * strides_[d];
    return off;
}

uint64_t HostTensor::raw_bits(const int64_t* index) const {
    const uint8_t* p = static_cast<const uint8_t*>(data()) + offset_of(index) * dtype_size(dtype_);
    uint64_t bits = 0;
    std::memcpy(&bits, p, dtype_size(dtype_));  // little-endian hosts only
    return bits;
}

double HostTensor::get(const int64_t* index) const {
    const uint8_t* p = static_cast<const uint8_t*>(data()) + offset_of(index) * dtype_size(dtype_);
    switch (dtype_) {
    case DType::f16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return half_bits_to_float(h);
    }
    case DType::bf16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return bf16_bits_to_float(h);
    }
    case DType::f32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    case DType::i32: {
        int32_t i;
        std::memcpy(&i, p, 4);
        return i;
    }
    case DType::i64: {
        int64_t i;
        std::memcpy(&i, p, 8);
        return static_cast<double>(i);
    }
    case DType::u8: return *p;
    }
    return 0;
}

void HostTensor::set(const int64_t* index, double v) {
    uint8_t* p = static_cast<uint8_t*>(data()) + offset_of(index) * dtype_size(dtype_);
    double r = round_to_dtype(v, dtype_);
    switch (dtype_) {
    case DType::f16: {
        uint16_t h = float_to_half_bits(static_cast<float>(r));  // r is exact in fp32
        std::memcpy(p, &h, 2);
        return;
    }
    case DType::bf16: {
        uint16_t h = float_to_bf16_bits(static_cast<float>(r));
        std::memcpy(p, &h, 2);
        return;
    }
    case DType::f32: {
        float f = static_cast<float>(r);
        std::memcpy(p, &f, 4);
        return;
    }
    case DType::i32: {
        int32_t i = static_cast<int32_t>(r);
        std::memcpy(p, &i, 4);
        return;
    }
    case DType::i64: {
        int64_t i = static_cast<int64_t>(r);
        std::memcpy(p, &i, 8);
        return;
    }
    case DType::u8: *p = static_cast<uint8_t>(r); return;
    }
}

std::string HostTensor::describe() const {
    std::ostringstream s;
    s << dtype_name(dtype_) << "[";
    for (size_t d = 0; d < shape_.size(); ++d) s << (d ? ", " : "") << shape_[d];
    s << "] strides [";
    for (size_t d = 0; d < strides_.size(); ++d) s << (d ? ", " : "") << strides_[d];
    s << "]";
    return s.str();
}

void fill_normal(HostTensor& t, uint64_t seed, double mean, double stddev) {
    uint64_t state = seed * 0x2545F4914F6CDD1DULL + 1;
    bool have_spare = false;
    double spare = 0;
    t.for_each_index([&](const int64_t* idx) {
        double z;
        if (have_spare) {
            z = spare;
            have_spare = false;
        } else {
            double u1 = uniform01(state), u2 = uniform01(state);
            double r = std::sqrt(-2.0 * std::log(u1));
            z = r * std::cos(2.0 * M_PI * u2);
            spare = r * std::sin(2.0 * M_PI * u2);
            have_spare = true;
        }
        t.set(idx, mean + stddev * z);
    });
}

void fill_uniform_int(HostTensor& t, uint64_t seed, int64_t lo, int64_t hi) {
    user_check(lo <= hi) << "fill_uniform_int: empty range [" << lo << ", " << hi << "]";
    uint64_t state = seed * 0x2545F4914F6CDD1DULL + 7;
    uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
    t.for_each_index([&](const int64_t* idx) {
        uint64_t r = range == 0 ? splitmix64(state) : splitmix64(state) % range;
        t.set(idx, static_cast<double>(lo + static_cast<int64_t>(r)));
    });
}

void fill_value(HostTensor& t, double v) {
    t.for_each_index([&](const int64_t* idx) { t.set(idx, v); });
}

HostTensor materialize(const HostTensor& t) {
    HostTensor out(t.dtype(), t.shape());
    int esize = dtype_size(t.dtype());
    t.for_each_index([&](const int64_t* idx) {
        std::memcpy(static_cast<uint8_t*>(out.data()) + out.offset_of(idx) * esize,
                    static_cast<const uint8_t*>(t.data()) + t.offset_of(idx) * esize, esize);
    });
    return out;
}

uint64_t poison_bits(DType dtype) {
    switch (dtype) {
    case DType::f16: return 0x7E5A;
    case DType::bf16: return 0x7FDA;
    case DType::f32: return 0x7FDADADA;
    case DType::i32: return 0x5ADADADA;
    case DType::i64: return 0x5ADADADADADADADAULL;
    case DType::u8: return 0x5A;
    }
    return 0;
}

void fill_poison(HostTensor& t) {
    uint64_t bits = poison_bits(t.dtype());
    int esize = dtype_size(t.dtype());
    t.for_each_index([&](const int64_t* idx) {
        std::memcpy(static_cast<uint8_t*>(t.data()) + t.offset_of(idx) * esize, &bits, esize);
    });
}

bool is_poison(const HostTensor& t, const int64_t* index) { return t.raw_bits(index) == poison_bits(t.dtype()); }

}  // namespace attnjit::reference
