// Helpers for errors about text the user wrote (the expression syntax, spec documents):
// line/column positions, the "source:line:column: reason" message with the offending line
// and a caret under the column, and "did you mean" suggestions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit::dsl {

// 1-based; the column counts characters (UTF-8 code points) of the line, so a caret
// lands under the right character in an editor.
struct TextPosition {
    int line = 1;
    int column = 1;
};

// The position of the byte at `offset` (offset == text.size() is just past the end).
TextPosition position_at(std::string_view text, size_t offset);
// The byte offset of a position (clamped to the line's end and the text's end).
size_t offset_at(std::string_view text, TextPosition pos);

// "<source>:<shown.line>:<shown.column>: <reason>" then the line of `text` that holds
// `offset` and a caret under it. `shown` differs from position_at(text, offset) when
// `text` is embedded in a larger document.
std::string located_message(std::string_view source_name, TextPosition shown, const std::string& reason,
                            std::string_view text, size_t offset);

// The candidate closest to `word` by edit distance, or "" when none is close enough to be
// a plausible typo.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);
// ", did you mean 'x'?" or "" (for appending to a message).
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace attnjit::dsl
