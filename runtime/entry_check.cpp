#include "runtime/entry_check.h"

#include <cstdint>
#include <type_traits>

#include "codegen/kernel_config.h"

namespace attnjit::runtime {
namespace {

constexpr size_t kElf64HeaderBytes = 64;
constexpr size_t kMachineOffset = 18;  // e_machine, after e_ident[16] and e_type
constexpr uint16_t kEmCuda = 190;

template <class T>
std::string differs(const char* what, const T& found, const T& expected) {
    std::string out = what;
    if constexpr (std::is_same_v<T, std::string>) out += " " + found + ", expected " + expected;
    else out += " " + std::to_string(found) + ", expected " + std::to_string(expected);
    return out;
}

}  // namespace

std::string why_not_a_cubin(std::string_view b) {
    if (b.size() < kElf64HeaderBytes) return "the cubin is too short to be an ELF file";
    if (b.substr(0, 4) != std::string_view("\x7f" "ELF", 4)) return "the cubin is not an ELF file";
    if (b[4] != 2 || b[5] != 1) return "the cubin is not a 64-bit little-endian ELF file";
    uint16_t machine = static_cast<uint16_t>(static_cast<unsigned char>(b[kMachineOffset]) |
                                             static_cast<unsigned char>(b[kMachineOffset + 1]) << 8);
    if (machine != kEmCuda)
        return "the cubin is an ELF file for machine " + std::to_string(machine) + ", not CUDA";
    return "";
}

std::string why_entry_does_not_match(const CompiledKernel& k, const codegen::KernelSource& source,
                                     const std::string& arch) {
    if (k.entry != source.entry) return differs("entry point", k.entry, source.entry);
    if (k.arch != arch) return differs("architecture", k.arch, arch);
    if (codegen::config_id(k.config) != codegen::config_id(source.config))
        return differs("kernel config", codegen::config_id(k.config), codegen::config_id(source.config));
    if (k.threads != source.threads) return differs("block size", k.threads, source.threads);
    if (k.smem_bytes != source.smem_bytes)
        return differs("shared memory", k.smem_bytes, source.smem_bytes);
    return why_not_a_cubin(k.cubin);
}

}  // namespace attnjit::runtime
