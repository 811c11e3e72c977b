// The per-bucket choices of an autotuner (api/autotune.h), for Attention's forward and
// AttentionBackward alike: a bucket's first launch tunes under that bucket's lock, so launches of
// the same bucket wait for it while launches of buckets already tuned go on.
#pragma once

#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "api/attention.h"
#include "runtime/cuda_api.h"
#include "support/debug.h"

namespace attnjit::api {

template <class T>
class TunedBuckets {
public:
    using Ptr = std::shared_ptr<const T>;

    // The choice for `bucket`: on its first launch `tune()`, remembered. A launch inside a CUDA
    // graph capture cannot time: it gets nullptr, not remembered, so a later launch tunes. If
    // tuning throws, one warning says so (`what` names the caller, e.g. "Attention") and
    // `fallback()` is remembered instead: a launch that works untuned must not fail, nor time
    // every candidate again, because tuning did.
    Ptr choice(const std::string& bucket, Stream stream, const char* what, const std::function<Ptr()>& tune,
               const std::function<Ptr()>& fallback) {
        std::shared_ptr<Slot> slot;
        {
            std::lock_guard<std::mutex> lock(mu_);
            std::shared_ptr<Slot>& s = slots_[bucket];
            if (!s) s = std::make_shared<Slot>();
            slot = s;
        }
        std::lock_guard<std::mutex> lock(slot->mu);
        if (slot->done) return slot->value;
        CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
        if (runtime::cuda().cuStreamIsCapturing(static_cast<CUstream>(stream), &capturing) != CUDA_SUCCESS ||
            capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
            debug(1) << "autotune: " << what << " " << bucket
                     << " first launched while a CUDA graph is captured: the default configuration";
            return nullptr;
        }
        try {
            slot->value = tune();
        } catch (const std::exception& e) {
            std::cerr << "attnjit: warning: autotuning " << bucket << " failed (" << e.what() << "); this " << what
                      << " runs its default configuration there\n";
            slot->value = fallback();
        }
        slot->done = true;
        return slot->value;
    }

private:
    struct Slot {
        std::mutex mu;
        bool done = false;
        Ptr value;
    };
    std::mutex mu_;  // guards the map only
    std::map<std::string, std::shared_ptr<Slot>> slots_;
};

}  // namespace attnjit::api
