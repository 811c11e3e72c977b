// CompiledKernel serialisation: round trip, and every kind of damage is detected.
#include <gtest/gtest.h>

#include <sstream>

#include "runtime/compiled_kernel.h"
#include "support/sha256.h"

namespace attnjit::runtime {
namespace {

CompiledKernel sample() {
    CompiledKernel k;
    k.key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    k.name = "fwd_bf16_d128";
    k.entry = "attnjit_forward";
    k.arch = "sm_90a";
    k.cubin = std::string("\x7f" "ELF\0\1\2\3", 8) + std::string(1000, '\xab');
    k.log = "warning: something";
    k.options = {"-std=c++17", "--gpu-architecture=sm_90a", "-default-device"};
    k.config = KernelConfig{KernelKind::forward, MainloopKind::sm80, ElemKind::bf16, 128, 128, TileConfig{128, 64, 4, 2}};
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
    EXPECT_EQ(back->key, k.key);
    EXPECT_EQ(back->name, k.name);
    EXPECT_EQ(back->entry, k.entry);
    EXPECT_EQ(back->arch, k.arch);
    EXPECT_EQ(back->cubin, k.cubin);
    EXPECT_EQ(back->log, k.log);
    EXPECT_EQ(back->options, k.options);
    EXPECT_EQ(back->config.kind, k.config.kind);
    EXPECT_EQ(back->config.mainloop, k.config.mainloop);
    EXPECT_EQ(back->config.elem, k.config.elem);
    EXPECT_EQ(back->config.head_dim_qk, k.config.head_dim_qk);
    EXPECT_EQ(back->config.head_dim_v, k.config.head_dim_v);
    EXPECT_EQ(back->config.tile, k.config.tile);
    EXPECT_EQ(back->threads, k.threads);
    EXPECT_EQ(back->smem_bytes, k.smem_bytes);
    EXPECT_EQ(back->compile_seconds, k.compile_seconds);
    // The structural features too (RA + MLA: the band and the latent dim).
    k.config.recip_band = true;
    k.config.latent = 512;
    back = deserialize(serialize(k), &why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(back->config, k.config);
}

// Every main loop's kernels round-trip: an sm90 kernel read back as "malformed" (the reader
// knew only simt and sm80) was removed from the disk cache and compiled again in every process.
TEST(CompiledKernelSerialization, EveryMainLoopRoundTrips) {
    for (MainloopKind loop : {MainloopKind::simt, MainloopKind::sm80, MainloopKind::sm90}) {
        CompiledKernel k = sample();
        k.config.mainloop = loop;
        std::string why;
        auto back = deserialize(serialize(k), &why);
        ASSERT_TRUE(back) << mainloop_kind_name(loop) << ": " << why;
        EXPECT_EQ(back->config, k.config);
    }
}

TEST(CompiledKernelSerialization, EmptyKernelRoundTrips) {
    auto back = deserialize(serialize(CompiledKernel{}));
    ASSERT_TRUE(back);
    EXPECT_TRUE(back->cubin.empty());
    EXPECT_TRUE(back->options.empty());
}

// A checksummed entry whose config names no main loop came from a buggy writer.
TEST(CompiledKernelSerialization, UnknownConfigEnumIsMalformed) {
    CompiledKernel k = sample();
    k.config.mainloop = static_cast<MainloopKind>(7);
    std::string why;
    EXPECT_FALSE(deserialize(serialize(k), &why));
    EXPECT_NE(why.find("malformed"), std::string::npos) << why;
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
    ASSERT_EQ(kCompiledKernelFormatVersion, 4)
        << "format version changed: update the golden hash below to the new value";
    EXPECT_EQ(sha256_hex(serialize(sample())),
              "382b8787902d7e868f0c3b5c3e424672a7099ec55befeaae5d0d37c8cd89e0e3")
        << "The serialized form of CompiledKernel changed. If that was intended, bump "
           "kCompiledKernelFormatVersion in runtime/compiled_kernel.h (old cache entries "
           "must not be read with the new layout) and update this golden hash.";
}

// A reader sizes its read from the header, so the header alone must be enough to refuse
// an entry too large to be real.
TEST(CompiledKernelSerialization, HeaderGivesTheSizeAndCapsIt) {
    const std::string good = serialize(sample());
    std::string why;
    auto size = serialized_size(std::string_view(good).substr(0, kCompiledKernelHeaderBytes), &why);
    ASSERT_TRUE(size) << why;
    EXPECT_EQ(*size, good.size());

    std::string huge = good;
    const uint64_t stated = kMaxCompiledKernelPayloadBytes + 1;
    for (int i = 0; i < 8; ++i) huge[12 + i] = static_cast<char>((stated >> (8 * i)) & 0xff);
    EXPECT_FALSE(serialized_size(huge, &why));
    EXPECT_NE(why.find("over the limit"), std::string::npos) << why;
    EXPECT_FALSE(deserialize(huge, &why));
    EXPECT_NE(why.find("over the limit"), std::string::npos) << why;
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
