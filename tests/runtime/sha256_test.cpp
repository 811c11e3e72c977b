// support/sha256: attnjit's own SHA-256 (FIPS 180-4) against the NIST examples and
// Python's hashlib, whole and fed in pieces. Cache keys and entry checksums depend on
// these exact digests: existing disk caches stay valid only while they do not change.
#include <gtest/gtest.h>

#include <string>

#include "support/sha256.h"

namespace attnjit {
namespace {

// FIPS 180-4's examples (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf").
TEST(Sha256, NistExamples) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding boundaries (55/56 bytes: the length still fits in the last
// block or not; 64: exactly one block), checked against Python's hashlib.sha256.
TEST(Sha256, PaddingBoundaries) {
    const std::pair<size_t, const char*> cases[] = {
        {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
        {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
        {57, "35df609437dcfea3279283ab79fd554e2bf78f8f7ae2de532d8ee300b09e8f73"},
        {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
        {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
        {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
        {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
        {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
        {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
    };
    for (const auto& [n, want] : cases) {
        std::string bytes;
        for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>((i * 7 + 3) & 255));
        EXPECT_EQ(sha256_hex(bytes), want) << n << " bytes";
    }
}

// Fed in pieces of every size from 1 to 130 bytes, the digest is the one of the whole.
TEST(Sha256, IncrementalUpdatesGiveTheSameDigest) {
    std::string bytes;
    for (size_t i = 0; i < 1000; ++i) bytes.push_back(static_cast<char>((i * 131 + 17) & 255));
    const std::string whole = sha256_hex(bytes);
    for (size_t piece = 1; piece <= 130; ++piece) {
        Sha256 h;
        for (size_t at = 0; at < bytes.size(); at += piece)
            h.update(std::string_view(bytes).substr(at, piece));
        EXPECT_EQ(h.hex_digest(), whole) << "pieces of " << piece;
    }
    Sha256 million;
    const std::string thousand(1000, 'a');
    for (int i = 0; i < 1000; ++i) million.update(thousand);
    EXPECT_EQ(million.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// HashBuilder's framing is part of every cache key: name, NUL, decimal length, ':',
// value, newline. Golden from Python: hashlib.sha256(b"format\x001:3\n" ...).
TEST(Sha256, HashBuilderFramingIsFrozen) {
    EXPECT_EQ(HashBuilder().add("format", 3).add("arch", "sm_80").add("toolchain", "nvrtc unavailable").hex(),
              "f2ce391dc0c81b0b19fd8cff6c0b370d66156225d77e23d69250e5d2c878b6f2");
}

}  // namespace
}  // namespace attnjit
