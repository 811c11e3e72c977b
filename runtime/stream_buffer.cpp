#include "runtime/stream_buffer.h"

#include <string>

#include "runtime/cuda_api.h"

namespace attnjit::runtime {

StreamBuffer::StreamBuffer(size_t bytes, CUstream stream) : bytes_(bytes), stream_(stream) {
    if (bytes == 0) return;
    current_context();
    check_cu(cuda().cuMemAllocAsync(&ptr_, bytes, stream), "cuMemAllocAsync(" + std::to_string(bytes) + " bytes)");
}

void StreamBuffer::zero() {
    if (ptr_) check_cu(cuda().cuMemsetD8Async(ptr_, 0, bytes_, stream_), "cuMemsetD8Async");
}

StreamBuffer::~StreamBuffer() {
    // A destructor must not throw: a failed free (a sticky kernel fault) leaks instead.
    if (ptr_) cuda().cuMemFreeAsync(ptr_, stream_);
}

}  // namespace attnjit::runtime
