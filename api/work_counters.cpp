#include "api/work_counters.h"

#include "runtime/cuda_api.h"

namespace attnjit::api {

int* WorkCounters::for_stream(CUstream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counters_.find(stream);
    if (it == counters_.end()) {
        CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
        runtime::check_cu(runtime::cuda().cuStreamIsCapturing(stream, &capturing), "cuStreamIsCapturing");
        if (capturing != CU_STREAM_CAPTURE_STATUS_NONE) return nullptr;
        runtime::DeviceBuffer b(sizeof(int));
        b.fill_bytes(0);
        it = counters_.emplace(stream, std::move(b)).first;
    }
    return static_cast<int*>(it->second.data());
}

}  // namespace attnjit::api
