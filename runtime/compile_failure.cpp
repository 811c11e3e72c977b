#include "runtime/compile_failure.h"

#include <sstream>

#include "runtime/source_excerpt.h"

namespace attnjit::runtime {
namespace {

std::string message(const std::string& kernel, const std::string& program, const std::string& arch,
                    const std::string& result, const std::string& log,
                    const std::vector<std::string>& options, const std::string& source) {
    std::ostringstream s;
    s << "attnjit: the generated code for kernel '" << kernel << "' failed to compile for "
      << arch << " (" << result << ").\n"
      << "This is a bug in attnjit's code generator or templates, not in your program; your "
         "score_mod/mask expressions appear in the generated source below. Please report it "
         "with this whole message; setting ATTNJIT_DUMP_DIR=<dir> also writes the complete "
         "source, options and log to files.\n";
    s << "--- NVRTC log ---\n" << (log.empty() ? "(empty)\n" : log);
    if (!log.empty() && log.back() != '\n') s << '\n';
    s << "--- NVRTC options ---\n";
    for (const auto& o : options) s << o << ' ';
    auto lines = error_lines(log, program);
    s << "\n--- generated source " << program
      << (lines.empty() ? "" : " ('>' marks the lines NVRTC blames)") << " ---\n"
      << numbered_excerpt(source, lines);
    return s.str();
}

}  // namespace

CompileFailure::CompileFailure(std::string kernel_name, std::string program_name, std::string arch,
                               std::string nvrtc_result, std::string log,
                               std::vector<std::string> options, std::string source)
    : EnvironmentError(
          message(kernel_name, program_name, arch, nvrtc_result, log, options, source)),
      kernel_name_(std::move(kernel_name)),
      arch_(std::move(arch)),
      log_(std::move(log)),
      options_(std::move(options)),
      source_(std::move(source)) {}

}  // namespace attnjit::runtime
