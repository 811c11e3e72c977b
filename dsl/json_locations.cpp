#include "dsl/json_locations.h"

#include <cctype>
#include <algorithm>
#include <charconv>
#include <set>

namespace attnjit::dsl {
namespace {

// The scanner recurses per nesting level; deeper values are skipped (and stay unlocated).
constexpr int kMaxDepth = 200;

struct Stop {};  // a syntax error: stop scanning

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Four hex digits at text[i..i+4), or -1.
long read_hex4(std::string_view text, size_t i) {
    if (i + 4 > text.size()) return -1;
    long v = 0;
    for (size_t k = 0; k < 4; ++k) {
        int h = hex_value(text[i + k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

}  // namespace

std::optional<DecodedString> decode_json_string(std::string_view text, size_t quote) {
    if (quote >= text.size() || text[quote] != '"') return std::nullopt;
    DecodedString s;
    size_t i = quote + 1;
    while (i < text.size() && text[i] != '"') {
        const size_t start = i;
        const size_t before = s.value.size();
        if (text[i] != '\\') {
            s.value += text[i++];
        } else {
            if (i + 1 >= text.size()) return std::nullopt;
            char e = text[i + 1];
            i += 2;
            switch (e) {
            case '"': s.value += '"'; break;
            case '\\': s.value += '\\'; break;
            case '/': s.value += '/'; break;
            case 'b': s.value += '\b'; break;
            case 'f': s.value += '\f'; break;
            case 'n': s.value += '\n'; break;
            case 'r': s.value += '\r'; break;
            case 't': s.value += '\t'; break;
            case 'u': {
                long cp = read_hex4(text, i);
                if (cp < 0) return std::nullopt;
                i += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < text.size() && text[i] == '\\' && text[i + 1] == 'u') {
                    long low = read_hex4(text, i + 2);
                    if (low >= 0xDC00 && low <= 0xDFFF) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        i += 6;
                    }
                }
                append_utf8(s.value, static_cast<unsigned>(cp));
                break;
            }
            default: return std::nullopt;
            }
        }
        s.offsets.insert(s.offsets.end(), s.value.size() - before, start);
    }
    if (i >= text.size()) return std::nullopt;
    s.offsets.push_back(i);
    return s;
}

std::string json_pointer(const std::string& parent, std::string_view key) {
    std::string p = parent + "/";
    for (char c : key) {
        if (c == '~') p += "~0";
        else if (c == '/') p += "~1";
        else p += c;
    }
    return p;
}

class JsonScanner {
public:
    JsonScanner(std::string_view text, JsonLocations& out) : t_(text), out_(out) {}

    void run() {
        try {
            space();
            value("", 0);
            space();
            if (i_ < t_.size()) throw Stop{};  // trailing content
        } catch (const Stop&) {
            out_.stop_ = std::min(i_, t_.size());
        }
    }

private:
    void space() {
        while (i_ < t_.size()) {
            char c = t_[i_];
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                ++i_;
            } else if (c == '/' && i_ + 1 < t_.size() && t_[i_ + 1] == '/') {
                while (i_ < t_.size() && t_[i_] != '\n') ++i_;
            } else if (c == '/' && i_ + 1 < t_.size() && t_[i_ + 1] == '*') {
                size_t end = t_.find("*/", i_ + 2);
                if (end == std::string_view::npos) throw Stop{};
                i_ = end + 2;
            } else {
                return;
            }
        }
    }

    std::string string() {
        auto s = decode_json_string(t_, i_);
        if (!s) throw Stop{};
        i_ = s->offsets.back() + 1;
        return s->value;
    }

    void value(const std::string& pointer, int depth) {
        if (i_ >= t_.size()) throw Stop{};
        out_.where_[pointer].value = i_;
        char c = t_[i_];
        if ((c == '{' || c == '[') && depth >= kMaxDepth) {
            skip_nested();
        } else if (c == '{') {
            object(pointer, depth);
        } else if (c == '[') {
            array(pointer, depth);
        } else if (c == '"') {
            string();
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            number();
        } else {
            size_t start = i_;
            while (i_ < t_.size() && std::isalpha(static_cast<unsigned char>(t_[i_]))) ++i_;
            std::string_view word = t_.substr(start, i_ - start);
            if (word != "true" && word != "false" && word != "null") {
                i_ = start;  // located at the start of the bad literal
                throw Stop{};
            }
        }
    }

    void object(const std::string& pointer, int depth) {
        ++i_;
        space();
        std::set<std::string> keys;
        if (i_ < t_.size() && t_[i_] == '}') {
            ++i_;
            return;
        }
        while (true) {
            if (i_ >= t_.size() || t_[i_] != '"') throw Stop{};
            const size_t key_at = i_;
            const std::string key = string();
            const std::string member = json_pointer(pointer, key);
            if (!keys.insert(key).second && !out_.duplicate_)
                out_.duplicate_ = JsonLocations::Duplicate{member, out_.where_[member].key, key_at};
            space();
            if (i_ >= t_.size() || t_[i_] != ':') throw Stop{};
            ++i_;
            space();
            out_.where_[member].key = key_at;  // a repeated key is located at its last use, as nlohmann keeps the last value
            value(member, depth + 1);
            space();
            if (i_ < t_.size() && t_[i_] == ',') {
                ++i_;
                space();
                continue;
            }
            if (i_ < t_.size() && t_[i_] == '}') {
                ++i_;
                return;
            }
            throw Stop{};
        }
    }

    void array(const std::string& pointer, int depth) {
        ++i_;
        space();
        if (i_ < t_.size() && t_[i_] == ']') {
            ++i_;
            return;
        }
        for (size_t index = 0;; ++index) {
            value(pointer + "/" + std::to_string(index), depth + 1);
            space();
            if (i_ < t_.size() && t_[i_] == ',') {
                ++i_;
                space();
                continue;
            }
            if (i_ < t_.size() && t_[i_] == ']') {
                ++i_;
                return;
            }
            throw Stop{};
        }
    }

    void number() {
        size_t start = i_;
        while (i_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '-' || t_[i_] == '+' ||
                                  t_[i_] == '.' || t_[i_] == 'e' || t_[i_] == 'E'))
            ++i_;
        double v = 0;
        const char* b = t_.data() + start;
        const char* e = t_.data() + i_;
        if (*b == '-') ++b;
        auto r = std::from_chars(b, e, v);
        std::string_view digits(b, static_cast<size_t>(e - b));
        bool negative_exponent = digits.find("e-") != std::string_view::npos || digits.find("E-") != std::string_view::npos;
        if (r.ec == std::errc::result_out_of_range && !negative_exponent && out_.overflow_ == JsonLocations::npos)
            out_.overflow_ = start;
    }

    // Past a too-deep array or object, minding strings.
    void skip_nested() {
        int depth = 0;
        while (i_ < t_.size()) {
            char c = t_[i_];
            if (c == '"') {
                string();
                continue;
            }
            ++i_;
            if (c == '{' || c == '[') ++depth;
            if ((c == '}' || c == ']') && --depth == 0) return;
        }
        throw Stop{};
    }

    std::string_view t_;
    JsonLocations& out_;
    size_t i_ = 0;
};

JsonLocations::JsonLocations(std::string_view text) { JsonScanner(text, *this).run(); }

size_t JsonLocations::value_offset(const std::string& pointer) const {
    auto it = where_.find(pointer);
    return it == where_.end() ? npos : it->second.value;
}

size_t JsonLocations::key_offset(const std::string& pointer) const {
    auto it = where_.find(pointer);
    return it == where_.end() ? npos : it->second.key;
}

size_t JsonLocations::offset(const std::string& pointer) const {
    size_t k = key_offset(pointer);
    return k != npos ? k : value_offset(pointer);
}

}  // namespace attnjit::dsl
