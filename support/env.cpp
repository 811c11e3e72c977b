#include "support/env.h"

#include <unistd.h>

#include <cstdlib>

namespace attnjit::env {

std::optional<std::string> get(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

std::string cache_dir() {
    if (auto d = get("ATTNJIT_CACHE_DIR")) return *d;
    // The XDG spec says to ignore a relative XDG_CACHE_HOME; a relative HOME is as odd.
    auto absolute = [](const std::optional<std::string>& p) { return p && (*p)[0] == '/'; };
    if (auto x = get("XDG_CACHE_HOME"); absolute(x)) return *x + "/attnjit";
    if (auto h = get("HOME"); absolute(h)) return *h + "/.cache/attnjit";
    // Per user: another user cannot own this name, and if they made it first the cache
    // refuses it (not ours) instead of loading what they put there.
    return "/tmp/attnjit-cache-" + std::to_string(::geteuid());
}

bool autotune() {
    auto v = get("ATTNJIT_AUTOTUNE");
    return v && !v->empty() && *v != "0" && *v != "false" && *v != "off" && *v != "no";
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

bool sm90_grid_one_cta_an_item() {
    auto v = get("ATTNJIT_SM90_GRID");
    return v && *v == "items";
}

bool lineinfo() {
    auto v = get("ATTNJIT_LINEINFO");
    return v && *v == "1";
}

}  // namespace attnjit::env
