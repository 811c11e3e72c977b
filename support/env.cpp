#include "support/env.h"

#include <cstdlib>

namespace attnjit::env {

std::optional<std::string> get(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

std::string cache_dir() {
    if (auto d = get("ATTNJIT_CACHE_DIR")) return *d;
    if (auto x = get("XDG_CACHE_HOME")) return *x + "/attnjit";
    if (auto h = get("HOME")) return *h + "/.cache/attnjit";
    return "/tmp/attnjit-cache";
}

bool disk_cache_disabled() {
    auto v = get("ATTNJIT_DISABLE_DISK_CACHE");
    return v && *v != "0";
}

std::optional<std::string> dump_dir() { return get("ATTNJIT_DUMP_DIR"); }

int debug_level() {
    auto v = get("ATTNJIT_DEBUG");
    return v ? std::atoi(v->c_str()) : 0;
}

std::optional<std::string> libcuda_path() { return get("ATTNJIT_LIBCUDA"); }
std::optional<std::string> libnvrtc_path() { return get("ATTNJIT_LIBNVRTC"); }
std::optional<std::string> cuda_home() { return get("CUDA_HOME"); }

}  // namespace attnjit::env
