#include "runtime/device_buffer.h"

#include <string>
#include <utility>

#include "runtime/cuda_api.h"
#include "support/error.h"

namespace attnjit::runtime {
namespace {

void check_range(size_t offset, size_t bytes, size_t size, const char* what) {
    internal_check(offset <= size && bytes <= size - offset)
        << "DeviceBuffer::" << what << ": bytes [" << offset << ", " << offset + bytes
        << ") outside a buffer of " << size << " bytes";
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) {
    if (bytes == 0) return;
    current_context();
    CUdeviceptr p = 0;
    check_cu(cuda().cuMemAlloc(&p, bytes), "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
    ptr_ = p;
    bytes_ = bytes;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        release();
        ptr_ = std::exchange(o.ptr_, 0);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

void DeviceBuffer::release() noexcept {
    // A destructor must not throw: a failed free (a context already torn down at exit,
    // a sticky kernel fault) leaks the allocation rather than terminating.
    if (ptr_) cuda().cuMemFree(ptr_);
    ptr_ = 0;
    bytes_ = 0;
}

DeviceBuffer DeviceBuffer::from_host(const void* src, size_t bytes) {
    DeviceBuffer b(bytes);
    b.upload(src, bytes);
    return b;
}

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
    check_range(offset, bytes, bytes_, "upload");
    if (bytes == 0) return;
    check_cu(cuda().cuMemcpyHtoD(ptr_ + offset, src, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
    check_range(offset, bytes, bytes_, "download");
    if (bytes == 0) return;
    check_cu(cuda().cuMemcpyDtoH(dst, ptr_ + offset, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::fill_bytes(uint8_t value) {
    if (bytes_ == 0) return;
    check_cu(cuda().cuMemsetD8(ptr_, value, bytes_), "cuMemsetD8");
    synchronize("cuCtxSynchronize after cuMemsetD8");
}

std::ostream& operator<<(std::ostream& os, const DeviceBuffer& b) {
    return os << "DeviceBuffer(0x" << std::hex << static_cast<unsigned long long>(b.ptr())
              << std::dec << ", " << b.bytes() << " bytes)";
}

void internal_check_storage(const DeviceBuffer& buffer, size_t bytes) {
    internal_check(buffer.bytes() == bytes)
        << "a DeviceTensor's buffer holds " << buffer.bytes() << " bytes but the host tensor's storage "
        << bytes << " bytes; make the buffer with to_device(host)";
}

void synchronize(const char* what) {
    current_context();
    check_cu(cuda().cuCtxSynchronize(), what);
}

void synchronize_stream(CUstream stream, const char* what) {
    check_cu(cuda().cuStreamSynchronize(stream), what);
}

}  // namespace attnjit::runtime
