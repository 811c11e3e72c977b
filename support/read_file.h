// The whole of a file that a person named (a spec, a bundle's manifest read by a tool): for
// the tools, benchmarks and test programs. Files that something else may have planted go
// through runtime/safe_file.h instead.
#pragma once

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace attnjit {

// nullopt when the file cannot be opened.
inline std::optional<std::string> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in.good()) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace attnjit
