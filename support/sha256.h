// SHA-256 (FIPS 180-4), written for attnjit so that its libraries depend on no crypto
// library; used for every cache key and entry checksum. Not for secrets: no constant-time
// guarantees are needed or made.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attnjit {

// Incremental SHA-256: update() any number of times, then digest() once.
class Sha256 {
public:
    Sha256();
    Sha256& update(std::string_view bytes);
    // The 32-byte digest. The object is spent afterwards (update() again is a bug).
    std::array<uint8_t, 32> digest();
    // Lowercase hex of digest().
    std::string hex_digest();

private:
    void compress(const uint8_t* block);

    std::array<uint32_t, 8> state_;
    std::array<uint8_t, 64> block_{};
    size_t block_used_ = 0;
    uint64_t total_bytes_ = 0;
};

// Lowercase hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);

// Ordered, typed field mixing: each field is written with its name and length, so
// ("ab","c") and ("a","bc") hash differently. Deterministic across runs and machines.
class HashBuilder {
public:
    HashBuilder& add(std::string_view field, std::string_view value);
    HashBuilder& add(std::string_view field, long long value);
    std::string hex() const { return sha256_hex(buffer_); }

private:
    std::string buffer_;
};

}  // namespace attnjit
