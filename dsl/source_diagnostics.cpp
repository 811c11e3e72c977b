#include "dsl/source_diagnostics.h"

#include <algorithm>

namespace attnjit::dsl {
namespace {

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Lines longer than this are shown as a window around the column.
constexpr int kExcerptHalfWidth = 60;

// Edit distance with adjacent transpositions (optimal string alignment), case-insensitive.
size_t edit_distance(std::string_view a, std::string_view b) {
    auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); };
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[a.size()][b.size()];
}

}  // namespace

TextPosition position_at(std::string_view text, size_t offset) {
    offset = std::min(offset, text.size());
    TextPosition pos;
    for (size_t i = 0; i < offset; ++i) {
        if (text[i] == '\n') {
            ++pos.line;
            pos.column = 1;
        } else if (!is_continuation_byte(text[i])) {
            ++pos.column;
        }
    }
    return pos;
}

size_t offset_at(std::string_view text, TextPosition pos) {
    size_t i = 0;
    for (int line = 1; line < pos.line && i < text.size(); ++i)
        if (text[i] == '\n') ++line;
    for (int column = 1; i < text.size() && text[i] != '\n'; ++i) {
        if (is_continuation_byte(text[i])) continue;
        if (column == pos.column) break;
        ++column;
    }
    return i;
}

std::string located_message(std::string_view source_name, TextPosition shown, const std::string& reason,
                            std::string_view text, size_t offset) {
    std::string out = std::string(source_name) + ":" + std::to_string(shown.line) + ":" +
                      std::to_string(shown.column) + ": " + reason;
    offset = std::min(offset, text.size());
    size_t begin = offset;
    while (begin > 0 && text[begin - 1] != '\n') --begin;
    size_t end = text.find('\n', offset);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files
    // Characters (code points) before the caret; a tab stays a tab so the caret lines up.
    std::vector<size_t> starts;  // byte offset in `line` of each character
    for (size_t i = 0; i < line.size(); ++i)
        if (!is_continuation_byte(line[i])) starts.push_back(i);
    const size_t caret_char = static_cast<size_t>(
        std::count_if(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(offset - begin),
                      [](char c) { return !is_continuation_byte(c); }));
    size_t first_char = 0, last_char = starts.size();
    if (starts.size() > 2 * kExcerptHalfWidth) {
        first_char = caret_char > kExcerptHalfWidth ? caret_char - kExcerptHalfWidth : 0;
        last_char = std::min(starts.size(), first_char + 2 * kExcerptHalfWidth);
    }
    const size_t byte_from = first_char < starts.size() ? starts[first_char] : line.size();
    const size_t byte_to = last_char < starts.size() ? starts[last_char] : line.size();
    std::string prefix = first_char > 0 ? "..." : "";
    out += "\n    " + prefix + std::string(line.substr(byte_from, byte_to - byte_from)) +
           (byte_to < line.size() ? "..." : "");
    out += "\n    " + std::string(prefix.size(), ' ');
    for (size_t c = first_char; c < caret_char && c < starts.size(); ++c) out += line[starts[c]] == '\t' ? '\t' : ' ';
    out += "^";
    return out;
}

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
    std::string best;
    // A plausible typo changes at most a third of the word, and never all of it.
    size_t best_distance = std::min(std::max<size_t>(1, word.size() / 3), word.size() - (word.empty() ? 0 : 1)) + 1;
    for (const auto& c : candidates) {
        size_t d = edit_distance(word, c);
        if (d < best_distance) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
    std::string best = closest_name(word, candidates);
    return best.empty() ? "" : "; did you mean '" + best + "'?";
}

}  // namespace attnjit::dsl
