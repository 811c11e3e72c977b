// The error of every textual front door (the expression parser, the JSON spec format): a
// UserError that knows the line and column it is about.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "support/exceptions.h"

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

}  // namespace attnjit::dsl
