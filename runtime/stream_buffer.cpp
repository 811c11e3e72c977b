#include "runtime/stream_buffer.h"

#include <string>

#include "runtime/cuda_api.h"

namespace attnjit::runtime {

StreamBuffer::StreamBuffer(size_t bytes, CUstream stream) : stream_(stream) {
    if (bytes == 0) return;
    current_context();
    check_cu(cuda().cuMemAllocAsync(&ptr_, bytes, stream), "cuMemAllocAsync(" + std::to_string(bytes) + " bytes)");
}

void StreamBuffer::zero(size_t offset, size_t bytes) const {
    if (bytes == 0) return;
    check_cu(cuda().cuMemsetD8Async(ptr_ + offset, 0, bytes, stream_), "cuMemsetD8Async");
}

StreamBuffer::~StreamBuffer() {
    // A destructor must not throw: a failed free (a sticky kernel fault) leaks instead.
    if (ptr_) cuda().cuMemFreeAsync(ptr_, stream_);
}

}  // namespace attnjit::runtime
