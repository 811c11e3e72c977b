// The umbrella header: the DSL and the runtime facade. Installed as <attnjit/attnjit.h>.
#pragma once

#include "dsl/dsl.h"
#include "api/attention.h"
#include "api/attention_backward.h"
#include "runtime/kernel_bundle.h"
#include "support/exceptions.h"

namespace attnjit {
// Kernels compiled ahead of time (attnjit-aot, docs/aot.md): attnjit::load_bundle(directory)
// adds a bundle directory to this process's; linked bundles register themselves.
using runtime::load_bundle;
}  // namespace attnjit
