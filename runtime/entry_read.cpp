#include "runtime/entry_read.h"

#include <sys/stat.h>

#include "runtime/compiled_kernel.h"

namespace attnjit::runtime {

Read read_entry(RegularFile& file, std::string& bytes, std::string& why) {
    switch (file.status()) {
        case RegularFile::Status::kOpen: break;
        case RegularFile::Status::kAbsent: return Read::kAbsent;
        case RegularFile::Status::kUnreadable: return Read::kUnreadable;
        case RegularFile::Status::kNotRegular:
            why = S_ISLNK(file.st().st_mode) ? "a symbolic link, not a regular file"
                                             : "not a regular file";
            return Read::kCorrupt;
    }
    const uint64_t file_size = static_cast<uint64_t>(file.st().st_size);
    if (file_size > kCompiledKernelHeaderBytes + kMaxCompiledKernelPayloadBytes) {
        why = std::to_string(file_size) + " bytes, larger than any entry may be";
        return Read::kCorrupt;
    }
    if (!file.read_exact(kCompiledKernelHeaderBytes, bytes)) {
        why = "truncated header";
        return Read::kCorrupt;
    }
    auto size = serialized_size(bytes, &why);
    if (!size) return Read::kCorrupt;
    if (*size != file_size) {
        why = "the file is " + std::to_string(file_size) + " bytes, its header says " +
              std::to_string(*size) + " (truncated or appended to)";
        return Read::kCorrupt;
    }
    if (!file.read_exact(*size - kCompiledKernelHeaderBytes, bytes)) {
        why = "shorter than its header says";
        return Read::kCorrupt;
    }
    return Read::kDone;
}


}  // namespace attnjit::runtime
