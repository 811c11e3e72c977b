// CompiledKernel serialisation: round trip, and every kind of damage is detected.
#include <gtest/gtest.h>

#include <sstream>

#include "runtime/compiled_kernel.h"
#include "support/sha256.h"

namespace attnjit::runtime {
namespace {

CompiledKernel sample() {
    CompiledKernel k;
    k.name = "fwd_bf16_d128";
    k.entry = "attnjit_forward";
    k.arch = "sm_90a";
    k.cubin = std::string("\x7f" "ELF\0\1\2\3", 8) + std::string(1000, '\xab');
    k.log = "warning: something";
    k.options = {"-std=c++17", "--gpu-architecture=sm_90a", "-default-device"};
    k.threads = 128;
    k.smem_bytes = 98304;
    k.compile_seconds = 1.5;
    return k;
}

TEST(CompiledKernelSerialization, RoundTripKeepsEveryField) {
    CompiledKernel k = sample();
    std::string why;
    auto back = deserialize(serialize(k), &why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(back->name, k.name);
    EXPECT_EQ(back->entry, k.entry);
    EXPECT_EQ(back->arch, k.arch);
    EXPECT_EQ(back->cubin, k.cubin);
    EXPECT_EQ(back->log, k.log);
    EXPECT_EQ(back->options, k.options);
    EXPECT_EQ(back->threads, k.threads);
    EXPECT_EQ(back->smem_bytes, k.smem_bytes);
    EXPECT_EQ(back->compile_seconds, k.compile_seconds);
}

TEST(CompiledKernelSerialization, EmptyKernelRoundTrips) {
    auto back = deserialize(serialize(CompiledKernel{}));
    ASSERT_TRUE(back);
    EXPECT_TRUE(back->cubin.empty());
    EXPECT_TRUE(back->options.empty());
}

TEST(CompiledKernelSerialization, EveryTruncationIsDetected) {
    const std::string bytes = serialize(sample());
    for (size_t n = 0; n < bytes.size(); n += (n < 200 ? 1 : 37)) {
        std::string why;
        EXPECT_FALSE(deserialize(std::string_view(bytes).substr(0, n), &why)) << n;
        EXPECT_FALSE(why.empty());
    }
}

TEST(CompiledKernelSerialization, CorruptionIsDetectedAndNamed) {
    const std::string good = serialize(sample());
    std::string why;

    std::string bad = good;
    bad[bad.size() - 20] ^= 0x01;  // inside the payload
    EXPECT_FALSE(deserialize(bad, &why));
    EXPECT_NE(why.find("checksum"), std::string::npos) << why;

    bad = good;
    bad[0] = 'X';
    EXPECT_FALSE(deserialize(bad, &why));
    EXPECT_NE(why.find("magic"), std::string::npos) << why;

    bad = good;
    bad[8] = 99;  // version
    EXPECT_FALSE(deserialize(bad, &why));
    EXPECT_NE(why.find("version 99"), std::string::npos) << why;

    EXPECT_FALSE(deserialize(good + "junk", &why));
    EXPECT_NE(why.find("appended"), std::string::npos) << why;

    EXPECT_FALSE(deserialize("", &why));
    EXPECT_NE(why.find("truncated"), std::string::npos) << why;
}

// jitify2's serialization goldens, in one line: the bytes of a fixed kernel must not
// change unless the format version does.
TEST(CompiledKernelSerialization, FormatIsFrozenForThisVersion) {
    ASSERT_EQ(kCompiledKernelFormatVersion, 1)
        << "format version changed: update the golden hash below to the new value";
    EXPECT_EQ(sha256_hex(serialize(sample())),
              "d713c3e186151ae4711223a337ba4e5ed3110b3da270ee4fc826277b6d74ba27")
        << "The serialized form of CompiledKernel changed. If that was intended, bump "
           "kCompiledKernelFormatVersion in runtime/compiled_kernel.h (old cache entries "
           "must not be read with the new layout) and update this golden hash.";
}

TEST(CompiledKernelSerialization, PrintsItself) {
    std::ostringstream s;
    s << sample();
    EXPECT_NE(s.str().find("fwd_bf16_d128"), std::string::npos);
    EXPECT_NE(s.str().find("sm_90a"), std::string::npos);
    EXPECT_NE(s.str().find("1008 bytes of cubin"), std::string::npos);
}

}  // namespace
}  // namespace attnjit::runtime
