// Everything a user needs to write attention variants.
#pragma once

#include "dsl/attention_spec.h"
#include "dsl/equality.h"
#include "dsl/ir.h"
#include "dsl/mods.h"
#include "dsl/operators.h"
#include "dsl/printer.h"
#include "dsl/vars.h"
#include "dsl/visitor.h"
