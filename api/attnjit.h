// The umbrella header: the DSL and the runtime facade. Installed as <attnjit/attnjit.h>.
#pragma once

#include "dsl/dsl.h"
#include "api/attention.h"
#include "api/attention_backward.h"
#include "support/exceptions.h"
