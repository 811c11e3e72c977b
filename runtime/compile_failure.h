// NVRTC rejected a generated kernel. That is attnjit's bug (the generator let something
// through that does not compile) or the toolchain's, never a plain user mistake, but the
// source it shows contains the user's expressions, so what() is written for both: the
// NVRTC log, the options, the numbered source around the errors, and how to report it.
#pragma once

#include <string>
#include <vector>

#include "support/exceptions.h"

namespace attnjit::runtime {

class CompileFailure : public EnvironmentError {
public:
    CompileFailure(std::string kernel_name, std::string program_name, std::string arch,
                   std::string nvrtc_result, std::string log, std::vector<std::string> options,
                   std::string source);

    const std::string& kernel_name() const { return kernel_name_; }
    const std::string& arch() const { return arch_; }
    const std::string& log() const { return log_; }
    const std::vector<std::string>& options() const { return options_; }
    const std::string& source() const { return source_; }

private:
    std::string kernel_name_, arch_, log_;
    std::vector<std::string> options_;
    std::string source_;
};

}  // namespace attnjit::runtime
