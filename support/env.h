// The only place attnjit reads environment variables. README.md lists them.
#pragma once

#include <optional>
#include <string>

namespace attnjit::env {

// ATTNJIT_CACHE_DIR: disk cache root (default $XDG_CACHE_HOME/attnjit or ~/.cache/attnjit).
std::string cache_dir();
// ATTNJIT_DISABLE_DISK_CACHE=1: memory cache only.
bool disk_cache_disabled();
// ATTNJIT_DUMP_DIR: write generated source, NVRTC options and log of every compile here.
std::optional<std::string> dump_dir();
// ATTNJIT_DEBUG=0..3: log pipeline stages (codegen passes, cache decisions) to stderr.
int debug_level();
// ATTNJIT_LIBCUDA / ATTNJIT_LIBNVRTC: explicit paths of the shared libraries to dlopen.
std::optional<std::string> libcuda_path();
std::optional<std::string> libnvrtc_path();

std::optional<std::string> get(const char* name);

}  // namespace attnjit::env
