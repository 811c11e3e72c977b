#include "support/sha256.h"

#include <openssl/evp.h>

#include "support/error.h"

namespace attnjit {

std::string sha256_hex(std::string_view bytes) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    internal_check(EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) == 1)
        << "OpenSSL SHA-256 failed";
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(2 * len);
    for (unsigned i = 0; i < len; ++i) {
        out.push_back(hex[digest[i] >> 4]);
        out.push_back(hex[digest[i] & 15]);
    }
    return out;
}

HashBuilder& HashBuilder::add(std::string_view field, std::string_view value) {
    buffer_ += field;
    buffer_ += '\0';
    buffer_ += std::to_string(value.size());
    buffer_ += ':';
    buffer_ += value;
    buffer_ += '\n';
    return *this;
}

HashBuilder& HashBuilder::add(std::string_view field, long long value) {
    return add(field, std::string_view(std::to_string(value)));
}

}  // namespace attnjit
