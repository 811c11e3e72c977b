// Runs a list of documents in a child process so that a crash, a sanitizer report or a
// hang ends one document, not the run: the parent records it as a finding against the
// document that was running and starts a new child at the next one. Without that, the
// first crashing input would hide every later finding in a CI log.
//
// The child streams a frame per event over a pipe: "started i", "slow stage ahead" (the
// per-document deadline is extended for NVRTC), "done i" with the outcome.
#pragma once

#include <cstddef>
#include <functional>

#include "spec_target.h"

namespace attnjit::fuzz {

struct RunnerOptions {
    double timeout_s = 30;        // per document, beyond which it is a hang
    double slow_stage_s = 180;    // added to the deadline by note_slow_stage()
    double budget_s = 900;        // no document starts after this many seconds
    bool fork = true;             // false: run in this process (for a debugger)
};

// Runs run_one(i) for i in [0, count) in a child; on_result(i, outcome) is called in the
// parent for each, with a crash or hang turned into a finding. Returns how many documents
// ran (fewer than count when the budget ran out).
size_t run_documents(size_t count, const std::function<Outcome(size_t)>& run_one,
                     const std::function<void(size_t, const Outcome&)>& on_result, const RunnerOptions& options);

// Called by run_one in the child before a stage that may take long (NVRTC).
void note_slow_stage();

}  // namespace attnjit::fuzz
