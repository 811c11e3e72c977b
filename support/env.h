// The only place attnjit reads environment variables. README.md lists them.
//
//   ATTNJIT_CACHE_DIR           disk cache root
//   ATTNJIT_DISABLE_DISK_CACHE  memory cache only
//   ATTNJIT_DUMP_DIR            dump source / options / log of every compile
//   ATTNJIT_DEBUG               0..3, log pipeline stages to stderr
//   ATTNJIT_LIBCUDA             explicit path of libcuda to dlopen
//   ATTNJIT_LIBNVRTC            explicit path of libnvrtc to dlopen
//   ATTNJIT_SM90_GRID           "items": the sm90 forward launches one CTA an item (benchmarks)
//   ATTNJIT_LINEINFO            1: compile kernels with -lineinfo (compute-sanitizer, ncu)
//   CUDA_HOME                   toolkit root, searched for libnvrtc (not ours, read-only)
//   XDG_CACHE_HOME, HOME        default disk cache root (not ours, read-only)
#pragma once

#include <optional>
#include <string>

namespace attnjit::env {

// ATTNJIT_CACHE_DIR: disk cache root. Default: $XDG_CACHE_HOME/attnjit, else
// $HOME/.cache/attnjit (each only when absolute), else /tmp/attnjit-cache-<uid>.
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
// CUDA_HOME: the CUDA toolkit root; $CUDA_HOME/lib64 is searched for libnvrtc.
std::optional<std::string> cuda_home();
// ATTNJIT_SM90_GRID=items: the sm90 forward launches one CTA a work item instead of its
// persistent grid (to measure one against the other); anything else: the default.
bool sm90_grid_one_cta_an_item();
// ATTNJIT_LINEINFO=1: kernels are compiled with -lineinfo, so that compute-sanitizer and
// ncu name source lines (a compile option: such kernels have their own cache keys).
bool lineinfo();
// ATTNJIT_AUTOTUNE=1 (anything but empty, 0, false, off, no): Attention tunes its forward's tile, and
// AttentionBackward its key-tile kernel's, for each shape bucket on first use where
// CompileOptions.autotune does not say otherwise (api/autotune.h).
bool autotune();

std::optional<std::string> get(const char* name);

}  // namespace attnjit::env
