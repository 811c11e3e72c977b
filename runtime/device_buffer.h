// DeviceBuffer: one RAII allocation of device memory in the current context, with the
// few copies tests, examples and benchmarks need. Goes through the dlopen'ed driver table
// (runtime/cuda_api.h), so it builds everywhere and throws EnvironmentError where no GPU
// is usable.
//
//   runtime::DeviceBuffer o(bytes);
//   o.poison();                          // every byte 0xFF: NaN in f16, bf16 and f32
//   attn(args);  runtime::synchronize();
//   std::vector<uint16_t> h = o.download_vector<uint16_t>();
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

#include "runtime/tensor_view.h"

namespace attnjit::runtime {

class DeviceBuffer {
public:
    DeviceBuffer() = default;  // empty: ptr() is 0, bytes() is 0
    // cuMemAlloc in current_context() (the primary context of device 0 if none is
    // current). Zero bytes makes an empty buffer. Contents are uninitialised.
    explicit DeviceBuffer(size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& o) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    // A buffer holding a copy of `bytes` bytes at `src`.
    static DeviceBuffer from_host(const void* src, size_t bytes);
    template <class T>
    static DeviceBuffer from_vector(const std::vector<T>& v) {
        return from_host(v.data(), v.size() * sizeof(T));
    }

    CUdeviceptr ptr() const { return ptr_; }
    void* data() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_)); }
    size_t bytes() const { return bytes_; }
    bool empty() const { return bytes_ == 0; }

    // Synchronous copies (cuMemcpyHtoD / DtoH); [offset, offset + bytes) must lie inside
    // the buffer (InternalError otherwise: that is the caller's bug, not the user's).
    void upload(const void* src, size_t bytes, size_t offset = 0);
    void download(void* dst, size_t bytes, size_t offset = 0) const;
    template <class T>
    std::vector<T> download_vector() const {
        std::vector<T> v(bytes_ / sizeof(T));
        download(v.data(), v.size() * sizeof(T));
        return v;
    }

    // Every byte set to `value` (cuMemsetD8, then synchronised, so a kernel launched on
    // any stream afterwards sees it).
    void fill_bytes(uint8_t value);
    // fill_bytes(0xFF): all-ones is a NaN in f16, bf16 and f32, so an output element
    // the kernel never wrote reads back as NaN.
    void poison() { fill_bytes(kPoisonByte); }
    static constexpr uint8_t kPoisonByte = 0xFF;

private:
    void release() noexcept;
    CUdeviceptr ptr_ = 0;
    size_t bytes_ = 0;
};

std::ostream& operator<<(std::ostream& os, const DeviceBuffer& b);

// A host tensor's storage mirrored on the device, and a view of it with the host
// tensor's dtype, shape, strides and offset (stride 0 broadcasts, transposed layouts and
// padding carry over unchanged).
// InternalError unless buffer.bytes() == bytes.
void internal_check_storage(const DeviceBuffer& buffer, size_t bytes);

struct DeviceTensor {
    DeviceBuffer buffer;
    TensorView view;  // points into buffer
};

// The view of `host`'s layout over `buffer`, which must mirror host's whole storage
// (same byte size). Host is any type with dtype(), shape(), strides(), storage() and
// storage_offset(), e.g. reference::HostTensor (a template, so the runtime does not
// depend on the reference).
template <class Host>
TensorView view_like(const DeviceBuffer& buffer, const Host& host) {
    internal_check_storage(buffer, host.storage().size());
    auto* base = static_cast<unsigned char*>(buffer.data());
    return TensorView{base + host.storage_offset() * dtype_size(host.dtype()), host.dtype(),
                      host.shape(), host.strides()};
}
// Allocates a buffer the size of host's storage, copies the storage, returns both.
template <class Host>
DeviceTensor to_device(const Host& host) {
    DeviceTensor t{DeviceBuffer::from_host(host.storage().data(), host.storage().size()), {}};
    t.view = view_like(t.buffer, host);
    return t;
}
// Copies the device storage back over host's storage (synchronous; call after the
// kernel's stream is done or rely on the legacy default stream's ordering).
template <class Host>
void from_device(const DeviceTensor& device, Host& host) {
    internal_check_storage(device.buffer, host.storage().size());
    device.buffer.download(host.storage().data(), host.storage().size());
}
// cuCtxSynchronize on current_context(): waits for every stream, and reports a kernel
// fault (illegal address, ...) as EnvironmentError naming `what`.
void synchronize(const char* what = "cuCtxSynchronize");
// cuStreamSynchronize(stream), likewise.
void synchronize_stream(CUstream stream, const char* what = "cuStreamSynchronize");

}  // namespace attnjit::runtime
