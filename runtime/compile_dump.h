// ATTNJIT_DUMP_DIR: the source, NVRTC options and log of every compile, for debugging,
// as <dir>/<program>.<content hash[0:16]>.<arch>.{cu,options.txt,log.txt}. The names
// are predictable, so each file is written under a fresh name (created exclusively,
// never through a link) and renamed over its final name: a link planted there is
// replaced, never written through.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_source.h"

namespace attnjit::runtime {

// <dir>/<program without .cu>.<hash>.<arch>: the dump files are this plus a suffix.
std::string compile_dump_stem(const std::string& dir, const codegen::KernelSource& source,
                              const std::string& program_name, const std::string& arch);

// Writes the three files (creating `dir` 0700 if missing). "" on success, else what
// failed, with the path and the system's reason; no partial file is left under a final
// name.
std::string write_compile_dump(const std::string& stem, const std::string& source,
                               const std::vector<std::string>& options, const std::string& log);

// With ATTNJIT_DUMP_DIR set, writes the dump of one compile. A failed dump never fails
// the compile: the first failure in the process warns on stderr, later ones are quiet.
void dump_compile_if_requested(const codegen::KernelSource& source,
                               const std::string& program_name, const std::string& arch,
                               const std::vector<std::string>& options, const std::string& log);

}  // namespace attnjit::runtime
