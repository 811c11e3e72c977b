// Reading one compiled-kernel entry file (compiled_kernel.h's format) that something other
// than this process may have put there: the disk cache's entries and a bundle's
// (kernel_bundle.h). Never more than its header states, never through a link.
#pragma once

#include <string>

#include "runtime/safe_file.h"

namespace attnjit::runtime {

enum class Read { kDone, kAbsent, kUnreadable, kCorrupt };

// Reads the entry at `path` into `bytes`, never more than its header states; `why` says
// what is wrong with a corrupt one. `file` stays open so the caller can check that a
// corrupt entry is still the one it read before removing it.
Read read_entry(RegularFile& file, std::string& bytes, std::string& why);

}  // namespace attnjit::runtime
