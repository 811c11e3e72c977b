// A shared library opened at run time with dlopen, so attnjit links and runs on machines
// without a driver or an NVRTC (jitify2's DynamicLibrary). Libraries are never closed:
// drivers do not like being unloaded, and the handles live as long as the process.
#pragma once

#include <string>
#include <vector>

namespace attnjit::runtime {

class DynamicLibrary {
public:
    // Tries the candidates in order; the first one dlopen accepts wins. When none does,
    // ok() is false and error() lists what dlopen said about each.
    static DynamicLibrary open_first(const std::vector<std::string>& candidates);

    bool ok() const { return handle_ != nullptr; }
    // The candidate that was opened, and the file it resolved to (symlinks followed).
    const std::string& path() const { return path_; }
    std::string resolved_path() const;
    const std::string& error() const { return error_; }
    // Hex of the ELF NT_GNU_BUILD_ID note: names the exact binary (patch release
    // included) on every machine; empty if the library has none.
    std::string build_id() const;

    // Null when the library does not export the symbol.
    void* symbol(const char* name) const;

private:
    void* handle_ = nullptr;
    std::string path_;
    std::string error_;
};

}  // namespace attnjit::runtime
