// The sm90 persistent forward's work counters (ForwardArgs::work_counter): one device int
// per stream, zero whenever no launch on that stream is running. A launch draws tickets from
// it and the CTA that draws the last one (items + grid - 1: each CTA draws exactly one past
// the last item) puts it back to zero, so launches need no memset or allocation of their own;
// launches on one stream run one after the other, and each stream has its own counter. (With
// a per-launch allocation and memset the persistent grid lost up to 19% at N 1024 on the
// H200, consistent with ~40 us a launch; not timed alone.) A new counter is zeroed
// synchronously, which a stream being captured into a CUDA graph does not allow: there
// for_stream gives none, and the launch takes one CTA an item.
#pragma once

#include <cuda.h>

#include <map>
#include <mutex>

#include "runtime/device_buffer.h"

namespace attnjit::api {

class WorkCounters {
public:
    // The counter of `stream` (allocated and zeroed on first use, in the current context);
    // null when it has none yet and the stream is being captured.
    int* for_stream(CUstream stream);

private:
    std::mutex mu_;
    std::map<CUstream, runtime::DeviceBuffer> counters_;
};

}  // namespace attnjit::api
