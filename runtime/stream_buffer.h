// StreamBuffer: device memory that lives in stream order, for the workspaces of a launch
// sequence: cuMemAllocAsync on the stream at construction, cuMemFreeAsync on the same
// stream at destruction, so the kernels enqueued in between may use it and the host need
// not wait for them. Memory comes from the device's default pool (cheap after the first
// use) and works under CUDA graph capture.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace attnjit::runtime {

class StreamBuffer {
public:
    // Zero bytes makes an empty buffer (data() is null). Contents are uninitialised.
    StreamBuffer(size_t bytes, CUstream stream);
    ~StreamBuffer();
    StreamBuffer(const StreamBuffer&) = delete;
    StreamBuffer& operator=(const StreamBuffer&) = delete;

    void* data() const { return reinterpret_cast<void*>(static_cast<size_t>(ptr_)); }
    // Bytes [offset, offset + bytes) set to 0, in stream order (cuMemsetD8Async).
    void zero(size_t offset, size_t bytes) const;

private:
    CUdeviceptr ptr_ = 0;
    CUstream stream_;
};

}  // namespace attnjit::runtime
