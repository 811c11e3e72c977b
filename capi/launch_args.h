// The C launch arguments of a forward (attnjit_launch_args) as attnjit::LaunchArgs, kept
// per thread and per handle so that a launch from another language allocates nothing once
// a thread has launched that handle before. Shared by attnjit_launch and
// attnjit_launch_backward (whose fwd argument is the forward's launch arguments).
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "attnjit/attnjit_c.h"
#include "capi/handles.h"

namespace attnjit::capi {

// The launch arguments of one kernel, kept per thread, with pointers to the map entries
// in the spec's (sorted-by-name) order so that positional and named arguments land
// without a map lookup.
struct Scratch {
    uint64_t kernel_id = 0;  // 0: unbound
    attnjit::LaunchArgs args;
    std::vector<attnjit::TensorView*> tensor_slots;
    std::vector<double*> scalar_slots;
};

// The scratch bound to a handle (its id, never reused) for this thread.
Scratch& scratch_for(uint64_t handle_id, const attnjit_spec& spec);

// Names an argument in messages; only printed when a check fails.
struct ArgName {
    const char* field;    // "q", "tensors", ...
    int index = -1;       // for arrays
    const char* name = nullptr;  // the captured tensor's name, when known
    const char* owner = "args";  // the struct argument: "args", "grads"
};
std::ostream& operator<<(std::ostream& os, const ArgName& a);

// One C tensor into a view (dtype and rank checked), reusing the view's storage.
void to_view(const attnjit_tensor& t, const ArgName& what, attnjit::TensorView& view);

// The whole forward argument list into s.args (counts, names and values checked).
void fill(Scratch& s, const attnjit_spec& spec, const attnjit_launch_args& a);

}  // namespace attnjit::capi
