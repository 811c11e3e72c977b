#include "runtime/compiled_kernel.h"

#include <array>
#include <cstdint>
#include <cstring>

#include "codegen/kernel_config.h"
#include "support/sha256.h"

namespace attnjit::runtime {
namespace {

constexpr char kMagic[8] = {'A', 'T', 'T', 'N', 'J', 'I', 'T', 'K'};
constexpr size_t kHashChars = 64;
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 8 + kHashChars;
static_assert(kHeaderBytes == kCompiledKernelHeaderBytes);

void put_u64(std::string& out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u32(std::string& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_str(std::string& out, std::string_view s) {
    put_u64(out, s.size());
    out.append(s);
}

// Reads the payload front to back; any read past the end sets failed and yields zeros.
struct Reader {
    std::string_view in;
    bool failed = false;

    uint64_t u64() {
        if (in.size() < 8) return fail();
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(in[i])) << (8 * i);
        in.remove_prefix(8);
        return v;
    }
    std::string str() {
        uint64_t n = u64();
        if (failed || n > in.size()) return fail(), std::string();
        std::string s(in.substr(0, n));
        in.remove_prefix(n);
        return s;
    }
    uint64_t fail() {
        failed = true;
        in = {};
        return 0;
    }
};

uint32_t get_u32(std::string_view b) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(b[i])) << (8 * i);
    return v;
}

// KernelConfig as ten ints: kind, main loop, element, head dims, tile, and the structural
// features (bit 0 score_conv, bit 1 bias_tile, bit 2 recip_band, bits 3 and up the latent dim;
// entries written before the last two read as without them, as they were).
constexpr int kConfigFields = 10;
std::array<int, kConfigFields> config_fields(const KernelConfig& c) {
    return {static_cast<int>(c.kind), static_cast<int>(c.mainloop), static_cast<int>(c.elem), c.head_dim_qk,
            c.head_dim_v, c.tile.block_m, c.tile.block_n, c.tile.warps, c.tile.stages,
            (c.score_conv ? 1 : 0) | (c.bias_tile ? 2 : 0) | (c.recip_band ? 4 : 0) | (c.latent << 3)};
}
// False when an enum is out of range (a writer's bug: the checksum held).
bool config_from_fields(const std::array<int, kConfigFields>& f, KernelConfig& c) {
    if (f[0] < static_cast<int>(KernelKind::forward) || f[0] > static_cast<int>(KernelKind::latent_gemm)) return false;
    if (f[1] < static_cast<int>(MainloopKind::simt) || f[1] > static_cast<int>(MainloopKind::sm90)) return false;
    if (f[2] < static_cast<int>(ElemKind::f16) || f[2] > static_cast<int>(ElemKind::f32)) return false;
    if (f[9] < 0 || (f[9] >> 3) > kMaxLatentTileDim) return false;
    c = KernelConfig{static_cast<KernelKind>(f[0]), static_cast<MainloopKind>(f[1]), static_cast<ElemKind>(f[2]),
                     f[3], f[4], TileConfig{f[5], f[6], f[7], f[8]}, (f[9] & 1) != 0, (f[9] & 2) != 0,
                     (f[9] & 4) != 0, f[9] >> 3};
    return true;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const CompiledKernel& k) {
    os << "CompiledKernel(" << k.name << ", entry " << k.entry << ", " << k.arch << ", "
       << k.cubin.size() << " bytes of cubin, " << k.threads << " threads, " << k.smem_bytes
       << " B smem, " << k.config;
    if (k.compile_seconds > 0) os << ", compiled in " << k.compile_seconds << " s";
    if (!k.log.empty()) os << ", " << k.log.size() << " bytes of log";
    return os << ")";
}

std::string serialize(const CompiledKernel& k) {
    std::string payload;
    put_str(payload, k.key);
    put_str(payload, k.name);
    put_str(payload, k.entry);
    put_str(payload, k.arch);
    put_str(payload, k.cubin);
    put_str(payload, k.log);
    put_u64(payload, k.options.size());
    for (const auto& o : k.options) put_str(payload, o);
    for (int v : config_fields(k.config)) put_u64(payload, static_cast<uint64_t>(static_cast<int64_t>(v)));
    put_u64(payload, static_cast<uint64_t>(static_cast<int64_t>(k.threads)));
    put_u64(payload, static_cast<uint64_t>(static_cast<int64_t>(k.smem_bytes)));
    uint64_t bits = 0;
    static_assert(sizeof(bits) == sizeof(k.compile_seconds));
    std::memcpy(&bits, &k.compile_seconds, sizeof(bits));
    put_u64(payload, bits);

    std::string out(kMagic, sizeof(kMagic));
    put_u32(out, kCompiledKernelFormatVersion);
    put_u64(out, payload.size());
    out += sha256_hex(payload);
    out += payload;
    return out;
}

std::optional<uint64_t> serialized_size(std::string_view header, std::string* why_not) {
    auto reject = [&](std::string why) -> std::optional<uint64_t> {
        if (why_not) *why_not = std::move(why);
        return std::nullopt;
    };
    if (header.size() < kHeaderBytes)
        return reject("truncated header (" + std::to_string(header.size()) + " bytes)");
    if (std::memcmp(header.data(), kMagic, sizeof(kMagic)) != 0)
        return reject("not an attnjit kernel file (bad magic)");
    uint32_t version = get_u32(header.substr(sizeof(kMagic)));
    if (version != kCompiledKernelFormatVersion)
        return reject("format version " + std::to_string(version) + ", expected " +
                      std::to_string(kCompiledKernelFormatVersion));
    Reader size_field{header.substr(sizeof(kMagic) + 4, 8)};
    uint64_t size = size_field.u64();
    if (size > kMaxCompiledKernelPayloadBytes)
        return reject("header states a payload of " + std::to_string(size) +
                      " bytes, over the limit of " +
                      std::to_string(kMaxCompiledKernelPayloadBytes));
    return kHeaderBytes + size;
}

std::optional<CompiledKernel> deserialize(std::string_view bytes, std::string* why_not) {
    auto reject = [&](std::string why) -> std::optional<CompiledKernel> {
        if (why_not) *why_not = std::move(why);
        return std::nullopt;
    };
    auto total = serialized_size(bytes, why_not);
    if (!total) return std::nullopt;
    uint64_t size = *total - kHeaderBytes;
    std::string_view hash = bytes.substr(sizeof(kMagic) + 12, kHashChars);
    std::string_view payload = bytes.substr(kHeaderBytes);
    if (payload.size() != size)
        return reject("payload is " + std::to_string(payload.size()) + " bytes, header says " +
                      std::to_string(size) + " (truncated or appended to)");
    if (sha256_hex(payload) != hash) return reject("checksum mismatch (corrupted)");

    Reader r{payload};
    CompiledKernel k;
    k.key = r.str();
    k.name = r.str();
    k.entry = r.str();
    k.arch = r.str();
    k.cubin = r.str();
    k.log = r.str();
    uint64_t n = r.u64();
    for (uint64_t i = 0; i < n && !r.failed; ++i) k.options.push_back(r.str());
    std::array<int, kConfigFields> config{};
    for (int& v : config) v = static_cast<int>(static_cast<int64_t>(r.u64()));
    const bool config_ok = config_from_fields(config, k.config);
    k.threads = static_cast<int>(static_cast<int64_t>(r.u64()));
    k.smem_bytes = static_cast<int>(static_cast<int64_t>(r.u64()));
    uint64_t bits = r.u64();
    std::memcpy(&k.compile_seconds, &bits, sizeof(bits));
    // A payload with a valid checksum but a bad shape means the writer had a bug.
    if (r.failed || !config_ok) return reject("malformed payload");
    if (!r.in.empty()) return reject("trailing bytes after the payload");
    return k;
}

}  // namespace attnjit::runtime
