#include "runtime/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>
#include <elf.h>
#include <limits.h>
#include <stdlib.h>

#include <string>

namespace attnjit::runtime {

DynamicLibrary DynamicLibrary::open_first(const std::vector<std::string>& candidates) {
    DynamicLibrary lib;
    for (const auto& c : candidates) {
        // RTLD_LOCAL: keep the driver's symbols out of the global namespace.
        if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
            lib.handle_ = h;
            lib.path_ = c;
            lib.error_.clear();
            return lib;
        }
        const char* why = dlerror();
        lib.error_ += "\n    " + c + ": " + (why ? why : "unknown dlopen error");
    }
    if (candidates.empty()) lib.error_ = "\n    (no candidate paths)";
    return lib;
}

std::string DynamicLibrary::resolved_path() const {
    if (!handle_) return "";
    // The link map names the file the loader actually found (a bare soname like
    // "libnvrtc.so.13" becomes a full path); realpath then follows the symlinks to the
    // versioned file, whose name carries the patch release.
    std::string file = path_;
    link_map* map = nullptr;
    if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
        file = map->l_name;
    char buf[PATH_MAX];
    if (realpath(file.c_str(), buf)) return buf;
    return file;
}

std::string DynamicLibrary::build_id() const {
    link_map* map = nullptr;
    if (!handle_ || dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || !map) return "";
    struct Search {
        ElfW(Addr) base;
        std::string id;
    } search{map->l_addr, ""};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) -> int {
            auto* s = static_cast<Search*>(data);
            if (info->dlpi_addr != s->base) return 0;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_NOTE) continue;
                const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
                const char* end = p + ph.p_memsz;
                while (p + sizeof(ElfW(Nhdr)) <= end) {
                    const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
                    const char* name = p + sizeof(ElfW(Nhdr));
                    const char* desc = name + ((note->n_namesz + 3) & ~3u);
                    if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                        std::string(name, 3) == "GNU") {
                        static const char* hex = "0123456789abcdef";
                        for (unsigned j = 0; j < note->n_descsz; ++j) {
                            unsigned char b = static_cast<unsigned char>(desc[j]);
                            s->id += hex[b >> 4];
                            s->id += hex[b & 15];
                        }
                        return 1;
                    }
                    p = desc + ((note->n_descsz + 3) & ~3u);
                }
            }
            return 1;
        },
        &search);
    return search.id;
}

void* DynamicLibrary::symbol(const char* name) const {
    return handle_ ? dlsym(handle_, name) : nullptr;
}

}  // namespace attnjit::runtime
