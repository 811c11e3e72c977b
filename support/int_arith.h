// Signed 64-bit arithmetic with no undefined behaviour, for what the host computes about
// user expressions (constant folding, interval bounds): checked_* say "no result" where
// the exact result does not fit, saturating_* clamp it to the int64 range.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace attnjit::int_arith {

inline std::optional<long long> checked_add(long long a, long long b) {
    long long r;
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
}
inline std::optional<long long> checked_sub(long long a, long long b) {
    long long r;
    if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
    return r;
}
inline std::optional<long long> checked_mul(long long a, long long b) {
    long long r;
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
}
inline std::optional<long long> checked_neg(long long a) { return checked_sub(0, a); }
// C division and remainder (truncating); none for a zero divisor or LLONG_MIN / -1.
inline std::optional<long long> checked_div(long long a, long long b) {
    if (b == 0 || (a == std::numeric_limits<long long>::min() && b == -1)) return std::nullopt;
    return a / b;
}
inline std::optional<long long> checked_mod(long long a, long long b) {
    if (b == 0) return std::nullopt;
    if (b == -1) return 0;  // LLONG_MIN % -1 traps on x86
    return a % b;
}

inline long long saturate(std::optional<long long> r, bool positive_if_overflow) {
    if (r) return *r;
    return positive_if_overflow ? std::numeric_limits<long long>::max() : std::numeric_limits<long long>::min();
}
inline long long saturating_add(long long a, long long b) { return saturate(checked_add(a, b), b > 0); }
inline long long saturating_sub(long long a, long long b) { return saturate(checked_sub(a, b), b < 0); }
inline long long saturating_mul(long long a, long long b) { return saturate(checked_mul(a, b), (a < 0) == (b < 0)); }
inline long long saturating_neg(long long a) { return saturate(checked_neg(a), true); }
inline long long saturating_div(long long a, long long b) {
    if (b == 0) return 0;  // callers never divide by zero; keep it defined anyway
    return saturate(checked_div(a, b), true);
}

}  // namespace attnjit::int_arith
