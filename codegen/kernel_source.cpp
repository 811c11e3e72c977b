#include "codegen/kernel_source.h"

#include "codegen/kernel_config.h"
#include "codegen/template_library.h"
#include "support/sha256.h"

namespace attnjit::codegen {

std::string KernelSource::content_hash() const {
    HashBuilder h;
    h.add("generator", kGeneratorVersion);
    h.add("templates", templates_hash());
    h.add("entry", entry);
    h.add("arch", arch);
    h.add("source", source);
    for (const auto& o : options) h.add("option", o);
    h.add("threads", threads);
    h.add("smem", smem_bytes);
    return h.hex();
}

std::ostream& operator<<(std::ostream& os, const KernelSource& k) {
    return os << "KernelSource(" << k.name << ", entry " << k.entry << ", " << k.config << ", " << k.arch << ", "
              << k.threads << " threads, " << k.smem_bytes << " B smem, " << k.source.size() << " bytes of source)";
}

}  // namespace attnjit::codegen
