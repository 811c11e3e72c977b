// The textual spec format: one JSON document describes a whole AttentionSpec, with
// score_mod and mask written in the expression syntax of dsl/printer.h (docs/spec_format.md).
//   spec_to_json(s) -> spec_from_json -> spec_to_json is the identity, and the parsed spec
//   equals s (same structural hash).
// Errors are SpecParseErrors (a UserError) that name the line and column in the document
// and say what was expected.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "dsl/attention_spec.h"
#include "dsl/spec_parse_error.h"

namespace attnjit::dsl {

// Parses and validates a JSON spec. `source_name` prefixes error locations.
AttentionSpec spec_from_json(std::string_view json, std::string_view source_name = "spec");
// The canonical JSON of a spec (keys in a fixed order, 2-space indent).
std::string spec_to_json(const AttentionSpec& spec);

}  // namespace attnjit::dsl
