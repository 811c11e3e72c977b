// Where things are in a JSON document, for error messages: nlohmann-json keeps no source
// positions, so a small scanner maps each value (by JSON pointer, "" for the root,
// "/tensors/bias/rank") to the byte offsets of its key and its value.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit::dsl {

class JsonLocations {
public:
    static constexpr size_t npos = std::string_view::npos;

    // Scans `text` (JSON with // and /* */ comments). Stops quietly at the first syntax
    // error: what was scanned before it stays located.
    explicit JsonLocations(std::string_view text);

    // Byte offset of the first character of the value at `pointer`, or npos.
    size_t value_offset(const std::string& pointer) const;
    // Byte offset of the opening quote of the key of the member at `pointer`, or npos
    // (the root and array elements have none).
    size_t key_offset(const std::string& pointer) const;
    // The key offset when there is one, else the value offset.
    size_t offset(const std::string& pointer) const;

    // The first key that repeats a key of the same object (JSON allows it; nlohmann keeps
    // the last value, which would hide a mistake).
    struct Duplicate {
        std::string pointer;
        size_t first_key, second_key;  // offsets of the two keys
    };
    const std::optional<Duplicate>& duplicate_key() const { return duplicate_; }
    // Offset of the first number too large for a double, or npos.
    size_t overflowing_number() const { return overflow_; }
    // Where the scan met a syntax error (the start of the token that does not fit), or
    // npos when it scanned the whole document.
    size_t stop_offset() const { return stop_; }

private:
    friend class JsonScanner;
    struct Where {
        size_t key = npos;
        size_t value = npos;
    };
    std::map<std::string, Where> where_;
    std::optional<Duplicate> duplicate_;
    size_t overflow_ = npos;
    size_t stop_ = npos;
};

// `parent` + "/" + key, with '~' and '/' escaped as RFC 6901 says.
std::string json_pointer(const std::string& parent, std::string_view key);

// The decoded value of the JSON string literal whose opening quote is at `quote`, and for
// each byte of it the offset in the document where that byte was written (an escape
// sequence maps all its bytes to its backslash); one more entry holds the closing quote.
struct DecodedString {
    std::string value;
    std::vector<size_t> offsets;
};
std::optional<DecodedString> decode_json_string(std::string_view text, size_t quote);

}  // namespace attnjit::dsl
