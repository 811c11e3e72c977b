// A spec file a tool was given (--specs): its text, or a UserError naming it.
#pragma once

#include <string>

#include "support/error.h"
#include "support/read_file.h"

namespace attnjit::tools {

inline std::string read_spec_file(const std::string& path) {
    const auto text = read_file(path);
    user_check(text.has_value()) << "--specs " << path << ": cannot open the file";
    return *text;
}

}  // namespace attnjit::tools
