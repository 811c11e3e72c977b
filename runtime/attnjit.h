// The umbrella header: the DSL and the runtime facade. Installed as <attnjit/attnjit.h>.
#pragma once

#include "dsl/dsl.h"
#include "runtime/attention.h"
#include "support/error.h"
