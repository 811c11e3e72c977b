// SHA-256 content hashes (OpenSSL), used for every cache key.
#pragma once

#include <string>
#include <string_view>

namespace attnjit {

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
