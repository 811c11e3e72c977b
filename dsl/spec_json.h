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
#include "support/error.h"

namespace attnjit::dsl {

// A textual spec or expression that does not parse or does not make sense. what() is the
// full message: "<source>:<line>:<column>: <what was expected / wrong>" plus the offending
// line with a caret under the column.
class SpecParseError : public UserError {
public:
    SpecParseError(const std::string& message, int line, int column)
        : SpecParseError(message, message, line, column) {}
    // `reason` is the message without the location and the excerpt (what was wrong).
    SpecParseError(const std::string& message, std::string reason, int line, int column)
        : UserError(message), reason_(std::move(reason)), line_(line), column_(column) {}
    int line() const { return line_; }      // 1-based
    int column() const { return column_; }  // 1-based, in characters (code points) of the line
    const std::string& reason() const { return reason_; }

private:
    std::string reason_;
    int line_, column_;
};

// A SpecParseError when `text` (a document, or an expression given alone) is larger than
// kMaxSpecDocumentBytes (dsl/limits.h); checked before anything is parsed.
void check_text_size(std::string_view text, std::string_view source_name);

// Parses and validates a JSON spec. `source_name` prefixes error locations.
AttentionSpec spec_from_json(std::string_view json, std::string_view source_name = "spec");
// The canonical JSON of a spec (keys in a fixed order, 2-space indent).
std::string spec_to_json(const AttentionSpec& spec);

}  // namespace attnjit::dsl
