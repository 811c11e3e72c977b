#include "codegen/kernel_source.h"

#include "codegen/template_library.h"
#include "support/sha256.h"

namespace attnjit::codegen {

std::string KernelSource::content_hash() const {
    HashBuilder h;
    h.add("generator", kGeneratorVersion);
    h.add("templates", templates_hash());
    h.add("entry", entry);
    h.add("source", source);
    for (const auto& o : options) h.add("option", o);
    h.add("threads", threads);
    h.add("smem", smem_bytes);
    return h.hex();
}

std::ostream& operator<<(std::ostream& os, const KernelSource& k) {
    return os << "KernelSource(" << k.name << ", entry " << k.entry << ", tile "
              << k.tile.block_m << "x" << k.tile.block_n << ", " << k.tile.warps << " warps, "
              << k.tile.stages << " stages, " << k.threads << " threads, " << k.smem_bytes
              << " B smem, " << k.source.size() << " bytes of source)";
}

}  // namespace attnjit::codegen
