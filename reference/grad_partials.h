// The captured-tensor and runtime-scalar gradients of the fp64 backward references, shared
// by the plain backward and the score convolution's: reads cross rows, so each worker sums
// into its own Partials, and the workers' partials are added in worker order (the result
// depends on the thread count only through that fixed order).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/autodiff.h"
#include "dsl/interpreter.h"
#include "reference/attention_backward.h"
#include "reference/inputs.h"

namespace attnjit::reference {

struct Partials {
    std::map<std::string, DoubleTensor> dtensors;  // in the tensors' logical shapes
    std::map<std::string, double> dscalars;
};

// Zeros for every name in `wanted` (a captured tensor of `in` or else a runtime scalar).
Partials zero_partials(const ForwardInputs& in, const std::set<std::string>& wanted);

// One score's contribution: dt = dL/dt at (b, h, i, j), env holding those indices and the
// score that score_mod read. Adds dt * d score_mod / d read at every read site and
// dt * d score_mod / d scalar.
void add_score_mod_grads(const codegen::ScoreModGradients& grads, const CapturedReader& reader, dsl::Env& env,
                         double dt, Partials& mine);

// Moves the sum of `parts` (worker 0 first) into out.dtensors and out.dscalars.
void merge_partials(std::vector<Partials>& parts, BackwardResult& out);

}  // namespace attnjit::reference
