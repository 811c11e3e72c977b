// Reading and writing the JSON spec format (docs/spec_format.md).
#include "dsl/spec_json.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "dsl/json_locations.h"
#include "dsl/limits.h"
#include "dsl/parser.h"
#include "dsl/printer.h"
#include "dsl/source_diagnostics.h"
#include "dsl/vars.h"
#include "support/error.h"

namespace attnjit::dsl {
namespace {

using Json = nlohmann::ordered_json;  // keeps the document's key order (errors follow it)

constexpr const char* kFormat = "attnjit.spec/1";
const std::vector<std::string> kKeys = {"format",  "dtype",   "head_dim",   "head_dim_qk", "head_dim_v",
                                        "q_heads", "kv_heads", "scale",     "return_lse",  "scalars",
                                        "tensors", "score_mod", "mask",      "sinks",
                                        "gate",    "score_conv", "reciprocal_band", "latent"};
const std::vector<std::string> kScoreConvKeys = {"tensor", "c_q", "c_k"};
const std::vector<std::string> kReciprocalBandKeys = {"width", "alpha", "causal"};
const std::vector<std::string> kLatentKeys = {"dim", "w_qlat", "w_vup"};
const std::vector<std::string> kTensorKeys = {"dtype", "rank"};

std::string join(const std::vector<std::string>& items) {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
    return s;
}

// A key or a string as JSON writes it (quoted, escaped), for messages.
std::string key_text(const std::string& key) {
    return Json(key).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// "the string \"abc\"", "the number 1.5", "an object": for "found ..." messages.
std::string describe(const Json& j) {
    switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case Json::value_t::string: {
        std::string s = j.get<std::string>();
        if (s.size() > 40) {
            size_t cut = 37;
            while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole characters
            s = s.substr(0, cut) + "...";
        }
        return "the string " + key_text(s);
    }
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "the number " + j.dump();
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    default: return "a " + std::string(j.type_name());
    }
}

// Names people use for the element types.
std::optional<DType> dtype_named(const std::string& s, bool tensor) {
    const std::vector<std::pair<const char*, DType>> names = {
        {"f16", DType::f16}, {"bf16", DType::bf16}, {"f32", DType::f32},
        {"i32", DType::i32}, {"i64", DType::i64},   {"u8", DType::u8}};
    for (const auto& [n, d] : names)
        if (s == n && (tensor || dtype_is_float(d))) return d;
    return std::nullopt;
}

std::string dtype_suggestion(const std::string& s, bool tensor) {
    const std::vector<std::pair<const char*, const char*>> aliases = {
        {"float16", "f16"}, {"half", "f16"},    {"fp16", "f16"},  {"bfloat16", "bf16"}, {"float32", "f32"},
        {"float", "f32"},   {"fp32", "f32"},    {"int32", "i32"}, {"int", "i32"},       {"int64", "i64"},
        {"long", "i64"},    {"uint8", "u8"},    {"bool", "u8"}};
    for (const auto& [alias, name] : aliases)
        if (s == alias && (tensor || dtype_is_float(*dtype_named(name, true)))) return std::string("; did you mean \"") + name + "\"?";
    return "";
}

// why_invalid() speaks the C++ API ("AttentionSpec.heads(3, 2): ..."); the document
// locates the key, so keep only what follows.
std::string without_api_prefix(const std::string& why) {
    if (why.rfind("AttentionSpec.", 0) == 0) {
        size_t colon = why.find("): ");
        if (colon != std::string::npos) return why.substr(colon + 3);
    }
    return why;
}

class SpecReader {
public:
    SpecReader(std::string_view text, std::string_view source) : text_(text), source_(source) {}

    AttentionSpec read() {
        check_text_size(text_, source_);
        parse_json();
        if (!doc_.is_object()) fail("", "a spec is a JSON object { \"format\": \"attnjit.spec/1\", ... }, found " + describe(doc_));
        if (const auto& dup = where_->duplicate_key()) {
            TextPosition first = position_at(text_, dup->first_key);
            fail_at(dup->second_key, "duplicate key " + key_text(last_key(dup->pointer)) + " (first given at " +
                                         std::to_string(first.line) + ":" + std::to_string(first.column) +
                                         "); give each key once");
        }
        check_format();
        for (const auto& [key, value] : doc_.items()) {
            bool known = false;
            for (const auto& k : kKeys) known |= key == k;
            if (!known)
                fail_key(json_pointer("", key), "unknown key " + key_text(key) + suggestion(key, kKeys) + " The keys of a spec are " +
                                        join(kKeys));
        }
        read_declarations();
        return build();
    }

private:
    // --- locations -----------------------------------------------------------------------
    [[noreturn]] void fail_at(size_t offset, const std::string& reason) const {
        TextPosition p = position_at(text_, offset);
        throw SpecParseError(located_message(source_, p, reason, text_, offset), reason, p.line, p.column);
    }
    size_t offset_of(const std::string& pointer, bool key) const {
        size_t o = key ? where_->offset(pointer) : where_->value_offset(pointer);
        return o == JsonLocations::npos ? 0 : o;
    }
    [[noreturn]] void fail(const std::string& pointer, const std::string& reason) const {
        fail_at(offset_of(pointer, false), reason);
    }
    [[noreturn]] void fail_key(const std::string& pointer, const std::string& reason) const {
        fail_at(offset_of(pointer, true), reason);
    }

    static std::string last_key(const std::string& pointer) {
        std::string k = pointer.substr(pointer.rfind('/') + 1), out;
        for (size_t i = 0; i < k.size(); ++i) {
            if (k[i] == '~' && i + 1 < k.size()) out += k[++i] == '1' ? '/' : '~';
            else out += k[i];
        }
        return out;
    }

    static std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
        std::string best = closest_name(word, candidates);
        return best.empty() ? "." : "; did you mean " + key_text(best) + "?";
    }

    // --- JSON syntax ---------------------------------------------------------------------
    void parse_json() {
        // nlohmann reads a NUL byte as the end of the input; the document is all of `text_`.
        if (size_t nul = text_.find('\0'); nul != std::string_view::npos)
            fail_at(nul, "the document contains a NUL byte; a spec is UTF-8 text");
        try {
            doc_ = Json::parse(text_.begin(), text_.end(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
        } catch (const Json::parse_error& e) {
            const size_t at = syntax_error_offset(e);
            fail_at(at, "invalid JSON: " + nlohmann_reason(e.what()) + syntax_hint(at));
        } catch (const Json::exception& e) {  // out_of_range.406: a number too large for a double
            JsonLocations scan(text_);
            size_t at = scan.overflowing_number();
            fail_at(at == JsonLocations::npos ? 0 : at, "invalid JSON: " + nlohmann_reason(e.what()) +
                                                            " (too large for a double)");
        }
        where_.emplace(text_);
    }

    // nlohmann's byte count points past the token that broke the syntax. Our scanner stops
    // at the start of that token, which is where a reader looks; inside a string (a control
    // character, a bad escape) nlohmann's own position is the precise one.
    size_t syntax_error_offset(const Json::parse_error& e) const {
        size_t at = e.byte > 0 ? std::min<size_t>(e.byte - 1, text_.size()) : 0;
        const std::string what = e.what();
        if (what.find("invalid string") != std::string::npos) return at;
        const size_t stop = JsonLocations(text_).stop_offset();
        if (stop != JsonLocations::npos && stop <= at) return stop;
        if (what.find("invalid literal") == std::string::npos && what.find("invalid number") == std::string::npos)
            return at;
        auto literal_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.'; };
        if (at > 0 && (at == text_.size() || !literal_char(text_[at]))) --at;
        while (at > 0 && literal_char(text_[at - 1])) --at;
        return at;
    }

    // The two slips JSON does not forgive: a trailing comma and a missing one.
    std::string syntax_hint(size_t at) const {
        if (at >= text_.size()) return "";
        size_t before = at;
        while (before > 0 && std::isspace(static_cast<unsigned char>(text_[before - 1]))) --before;
        const char prev = before > 0 ? text_[before - 1] : '\0';
        if ((text_[at] == '}' || text_[at] == ']') && prev == ',') return " (JSON allows no comma before a closing bracket)";
        if (text_[at] == '"' && (prev == '"' || prev == '}' || prev == ']' || std::isalnum(static_cast<unsigned char>(prev))))
            return " (is a ',' missing before it?)";
        return "";
    }

    // "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error ..."
    // -> "syntax error ..." (the location is ours).
    static std::string nlohmann_reason(const std::string& what) {
        size_t column = what.find("column ");
        size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
        if (colon != std::string::npos) return what.substr(colon + 2);
        size_t bracket = what.find("] ");
        return bracket == std::string::npos ? what : what.substr(bracket + 2);
    }

    // --- typed fields --------------------------------------------------------------------
    const Json* member(const std::string& key) const {
        auto it = doc_.find(key);
        return it == doc_.end() ? nullptr : &*it;
    }

    void check_format() {
        const Json* f = member("format");
        if (!f)
            fail("", "missing \"format\": a spec starts with \"format\": \"" + std::string(kFormat) +
                         "\" (the version of this format)");
        if (!f->is_string()) fail("/format", "\"format\" must be the string \"" + std::string(kFormat) + "\", found " + describe(*f));
        const std::string v = f->get<std::string>();
        if (v == kFormat) return;
        if (v.rfind("attnjit.spec/", 0) == 0)
            fail("/format", "unknown format version " + key_text(v) + ": this build of attnjit reads \"" + kFormat +
                                "\" (a newer attnjit may read it)");
        fail("/format", "\"format\" is " + key_text(v) + "; a spec document says \"format\": \"" + kFormat + "\"");
    }

    int read_int(const std::string& pointer, const Json& j, const char* what) const {
        if (j.is_number_float())
            fail(pointer, what + std::string(" must be an integer, found ") + describe(j) + " (write it without a fraction or exponent)");
        if (!j.is_number_integer()) fail(pointer, what + std::string(" must be an integer, found ") + describe(j));
        if (j.is_number_unsigned() ? j.get<unsigned long long>() > static_cast<unsigned long long>(std::numeric_limits<int>::max())
                                   : (j.get<long long>() < std::numeric_limits<int>::min() ||
                                      j.get<long long>() > std::numeric_limits<int>::max()))
            fail(pointer, what + std::string(" is ") + j.dump() + ", out of the range of a 32-bit int");
        return static_cast<int>(j.get<long long>());
    }

    std::optional<int> optional_int(const std::string& key) const {
        const Json* j = member(key);
        if (!j) return std::nullopt;
        return read_int("/" + key, *j, key_text(key).c_str());
    }

    DType read_dtype(const std::string& pointer, const Json& j, bool tensor) const {
        const char* allowed = tensor ? "f16, bf16, f32, i32, i64 or u8" : "f16, bf16 or f32";
        if (!j.is_string()) fail(pointer, "a dtype is a string (" + std::string(allowed) + "), found " + describe(j));
        const std::string s = j.get<std::string>();
        if (auto d = dtype_named(s, tensor)) return *d;
        std::string hint = dtype_suggestion(s, tensor);
        if (hint.empty()) {
            std::vector<std::string> names = {"f16", "bf16", "f32"};
            if (tensor) names.insert(names.end(), {"i32", "i64", "u8"});
            std::string best = closest_name(s, names);
            if (!best.empty()) hint = "; did you mean \"" + best + "\"?";
        }
        if (!tensor && dtype_named(s, true))
            fail(pointer, "dtype " + key_text(s) + " is not an element type of Q, K and V; use " + allowed);
        fail(pointer, "unknown dtype " + key_text(s) + hint + " (use " + allowed + ")");
    }

    // --- scalars and tensors -------------------------------------------------------------
    void check_name(const std::string& pointer, const std::string& name, const char* what) const {
        if (!is_valid_user_name(name))
            fail_key(pointer, std::string(what) + " name " + key_text(name) +
                                  " is not usable: names are C identifiers of at most 64 characters that do not "
                                  "start with '__' or 'attnjit' and are not built-in or function names (score, b, h, "
                                  "kv_head, q_idx, kv_idx, q_len, kv_len, exp, min, select, ...)");
    }

    void read_declarations() {
        if (const Json* s = member("scalars"); s && !s->is_null()) {
            if (!s->is_object())
                fail("/scalars", "\"scalars\" is an object of name: \"float\" or \"int\", found " + describe(*s));
            if (s->size() > static_cast<size_t>(kMaxRuntimeScalars))
                fail("/scalars", "\"scalars\" declares " + std::to_string(s->size()) + " runtime scalars, and the limit is " +
                                     std::to_string(kMaxRuntimeScalars) + " (docs/spec_format.md, Limits)");
            for (const auto& [name, type] : s->items()) {
                const std::string p = json_pointer("/scalars", name);
                check_name(p, name, "scalar");
                if (!type.is_string() || (type != "float" && type != "int"))
                    fail(p, "scalar \"" + name + "\" must have type \"float\" or \"int\", found " + describe(type) +
                                (type == "bool" ? " (runtime scalars are numbers; compare one in the expression)" : ""));
                names_.scalars[name] = type == "float" ? Type::Float : Type::Int;
            }
        }
        if (const Json* t = member("tensors"); t && !t->is_null()) {
            if (!t->is_object())
                fail("/tensors", "\"tensors\" is an object of name: {\"dtype\": ..., \"rank\": ...}, found " + describe(*t));
            if (t->size() > static_cast<size_t>(kMaxCapturedTensors))
                fail("/tensors", "\"tensors\" declares " + std::to_string(t->size()) + " captured tensors, and the limit is " +
                                     std::to_string(kMaxCapturedTensors) + " (docs/spec_format.md, Limits)");
            for (const auto& [name, info] : t->items()) {
                const std::string p = json_pointer("/tensors", name);
                check_name(p, name, "tensor");
                if (names_.scalars.count(name))
                    fail_key(p, "\"" + name + "\" is declared both as a scalar and as a tensor; give them different names");
                names_.tensors[name] = read_tensor(p, name, info);
            }
        }
    }

    TensorInfo read_tensor(const std::string& p, const std::string& name, const Json& info) const {
        if (!info.is_object())
            fail(p, "tensor \"" + name + "\" is declared as {\"dtype\": \"f32\", \"rank\": 4}, found " + describe(info));
        for (const auto& [key, v] : info.items()) {
            if (key != "dtype" && key != "rank")
                fail_key(json_pointer(p, key), "unknown key " + key_text(key) + " in tensor \"" + name + "\"" +
                                                   suggestion(key, kTensorKeys) + " A tensor has \"dtype\" and \"rank\"");
        }
        if (!info.contains("dtype")) fail(p, "tensor \"" + name + "\" needs a \"dtype\" (f16, bf16, f32, i32, i64 or u8)");
        if (!info.contains("rank")) fail(p, "tensor \"" + name + "\" needs a \"rank\" (1 to 6)");
        TensorInfo t{read_dtype(json_pointer(p, "dtype"), info["dtype"], true),
                     read_int(json_pointer(p, "rank"), info["rank"], "a tensor's \"rank\"")};
        if (t.rank < 1 || t.rank > 6)
            fail(json_pointer(p, "rank"), "tensor \"" + name + "\" has rank " + std::to_string(t.rank) +
                                              "; captured tensors have rank 1 to 6");
        return t;
    }

    // --- expressions ---------------------------------------------------------------------
    std::optional<Expr> read_expr(const std::string& key) {
        const Json* j = member(key);
        if (!j || j->is_null()) return std::nullopt;
        const std::string p = "/" + key;
        if (!j->is_string())
            fail(p, key_text(key) + " is an expression in a string, e.g. " +
                        (key == "mask" ? "\"kv_idx <= q_idx\"" : "\"cap * tanh(score / cap)\"") + ", or null; found " +
                        describe(*j));
        const std::string text = j->get<std::string>();
        // Each character of the expression is located where it was written in the
        // document, through any escape sequences (else at the string's opening quote).
        const size_t quote = offset_of(p, false);
        const auto decoded = decode_json_string(text_, quote);
        auto doc_offset = [&](size_t offset) {
            return decoded && decoded->value == text && offset < decoded->offsets.size() ? decoded->offsets[offset] : quote;
        };
        try {
            return parse_expr(text, names_, source_, [&](size_t offset) { return position_at(text_, doc_offset(offset)); });
        } catch (const SpecParseError& e) {
            fail_at(offset_at(text_, {e.line(), e.column()}), "in " + key_text(key) + ": " + e.reason());
        }
    }

    // --- the spec ------------------------------------------------------------------------
    AttentionSpec build() {
        AttentionSpec spec;
        const Json* dtype = member("dtype");
        if (!dtype) fail("", "missing \"dtype\": the element type of Q, K, V and O (f16, bf16 or f32)");
        spec.dtype(read_dtype("/dtype", *dtype, false));

        const std::string dims_key = read_head_dims(spec);
        check(spec, dims_key);

        const auto q_heads = optional_int("q_heads"), kv_heads = optional_int("kv_heads");
        spec.heads(q_heads.value_or(0), kv_heads.value_or(0));
        check(spec, (q_heads && *q_heads < 0) || !kv_heads ? "/q_heads" : "/kv_heads");

        const auto score_mod = read_expr("score_mod");
        const auto mask = read_expr("mask");
        if (score_mod) check(spec.score_mod(*score_mod), "/score_mod");
        if (mask) check(spec.mask(*mask), "/mask");
        read_sinks(spec);
        read_gate(spec);
        read_score_conv(spec);
        read_reciprocal_band(spec);
        read_latent(spec);
        check_all_declarations_used(spec);

        if (const Json* s = member("scale"); s && !s->is_null()) {
            if (!s->is_number())
                fail("/scale", "\"scale\" is a number, or null for 1/sqrt(head_dim_qk); found " + describe(*s));
            spec.scale(s->get<double>());
            check(spec, "/scale");
        }
        if (const Json* r = member("return_lse")) {
            if (!r->is_boolean()) fail("/return_lse", "\"return_lse\" is true or false, found " + describe(*r));
            spec.return_lse(r->get<bool>());
        }
        check(spec, "");
        return spec;
    }

    // "sinks": null, or the name of a declared float tensor of rank 1 (the sink logits, [Hq]).
    void read_sinks(AttentionSpec& spec) const {
        const Json* s = member("sinks");
        if (!s || s->is_null()) return;
        if (!s->is_string())
            fail("/sinks", "\"sinks\" is the name of a declared tensor of rank 1 holding the sink logits [Hq] "
                           "(e.g. \"sinks\"), or null; found " + describe(*s));
        const std::string name = s->get<std::string>();
        auto it = names_.tensors.find(name);
        if (it == names_.tensors.end())
            fail("/sinks", "\"sinks\" names tensor " + key_text(name) +
                               ", which is not declared under \"tensors\"; declare it as {\"dtype\": \"f32\", "
                               "\"rank\": 1}");
        const DType dt = it->second.dtype;
        if (it->second.rank != 1 || (dt != DType::f32 && dt != DType::f16 && dt != DType::bf16))
            fail("/sinks", "the sinks tensor " + key_text(name) + " is declared as " + dtype_name(dt) + ", rank " +
                               std::to_string(it->second.rank) +
                               "; sink logits are a float tensor of rank 1 (f32, f16 or bf16), [Hq]");
        check(spec.sinks(name, dt), "/sinks");
    }

    // A declared tensor named by a structural key ("gate", "score_conv"/"tensor"); fails
    // with `shape` (what the tensor must be) when it is not declared.
    const TensorInfo& declared_tensor(const std::string& pointer, const std::string& name,
                                      const std::string& shape) const {
        auto it = names_.tensors.find(name);
        if (it == names_.tensors.end())
            fail(pointer, "names tensor " + key_text(name) + ", which is not declared under \"tensors\"; declare it: " +
                              shape);
        return it->second;
    }

    // "gate": null, or the name of a declared tensor of rank 4 and the spec's dtype (the gate
    // logits, shaped like the output).
    void read_gate(AttentionSpec& spec) const {
        const Json* g = member("gate");
        if (!g || g->is_null()) return;
        const std::string shape = "{\"dtype\": \"" + std::string(dtype_name(spec.dtype())) + "\", \"rank\": 4}";
        if (!g->is_string())
            fail("/gate", "\"gate\" is the name of a declared tensor [B, Hq, Nq, Dv] holding the gate logits "
                          "(e.g. \"gate\"), or null; found " + describe(*g));
        const std::string name = g->get<std::string>();
        const TensorInfo& info = declared_tensor("/gate", name, shape);
        if (info.rank != 4 || info.dtype != spec.dtype())
            fail("/gate", "the gate tensor " + key_text(name) + " is declared as " + dtype_name(info.dtype) + ", rank " +
                              std::to_string(info.rank) + "; the gate is shaped like the output: " + shape);
        check(spec.gate(name), "/gate");
    }

    // "score_conv": null, or {"tensor": name of a declared float tensor of rank 3 [Hq, c_q, c_k],
    // "c_q": int, "c_k": int}.
    void read_score_conv(AttentionSpec& spec) const {
        const Json* c = member("score_conv");
        if (!c || c->is_null()) return;
        if (!c->is_object())
            fail("/score_conv", "\"score_conv\" is {\"tensor\": \"theta\", \"c_q\": 6, \"c_k\": 11} or null; found " +
                                    describe(*c));
        for (const auto& [key, value] : c->items())
            if (std::find(kScoreConvKeys.begin(), kScoreConvKeys.end(), key) == kScoreConvKeys.end())
                fail_key(json_pointer("/score_conv", key),
                         "unknown key " + key_text(key) + " in \"score_conv\"; expected " + join(kScoreConvKeys));
        for (const auto& key : kScoreConvKeys)
            if (!c->contains(key))
                fail("/score_conv", "\"score_conv\" needs \"" + key + "\" (keys: " + join(kScoreConvKeys) + ")");
        const Json& t = c->at("tensor");
        if (!t.is_string()) fail("/score_conv/tensor", "\"tensor\" is the name of the kernel tensor; found " + describe(t));
        const std::string name = t.get<std::string>();
        const TensorInfo& info = declared_tensor("/score_conv/tensor", name, "{\"dtype\": \"f32\", \"rank\": 3}");
        if (info.rank != 3 || (info.dtype != DType::f32 && info.dtype != DType::f16 && info.dtype != DType::bf16))
            fail("/score_conv/tensor", "the kernel tensor " + key_text(name) + " is declared as " + dtype_name(info.dtype) +
                                           ", rank " + std::to_string(info.rank) +
                                           "; it is a float tensor of rank 3 (f32, f16 or bf16), [Hq, c_q, c_k]");
        const int c_q = read_int("/score_conv/c_q", c->at("c_q"), "\"c_q\"");
        const int c_k = read_int("/score_conv/c_k", c->at("c_k"), "\"c_k\"");
        check(spec.score_conv(name, c_q, c_k, info.dtype), "/score_conv");
    }

    // "reciprocal_band": null, or {"width": int, "alpha": name of a declared f32 tensor of rank
    // 1 [Hq], "causal": bool (optional, default true)}.
    void read_reciprocal_band(AttentionSpec& spec) const {
        const Json* c = member("reciprocal_band");
        if (!c || c->is_null()) return;
        if (!c->is_object())
            fail("/reciprocal_band",
                 "\"reciprocal_band\" is {\"width\": 64, \"alpha\": \"alpha\", \"causal\": true} or null; found " +
                     describe(*c));
        for (const auto& [key, value] : c->items())
            if (std::find(kReciprocalBandKeys.begin(), kReciprocalBandKeys.end(), key) == kReciprocalBandKeys.end())
                fail_key(json_pointer("/reciprocal_band", key), "unknown key " + key_text(key) +
                                                                    " in \"reciprocal_band\"; expected " +
                                                                    join(kReciprocalBandKeys));
        for (const char* key : {"width", "alpha"})
            if (!c->contains(key))
                fail("/reciprocal_band", std::string("\"reciprocal_band\" needs \"") + key + "\" (keys: " +
                                             join(kReciprocalBandKeys) + "; \"causal\" defaults to true)");
        const Json& a = c->at("alpha");
        if (!a.is_string())
            fail("/reciprocal_band/alpha", "\"alpha\" is the name of the alpha tensor [Hq]; found " + describe(a));
        const std::string name = a.get<std::string>();
        const TensorInfo& info = declared_tensor("/reciprocal_band/alpha", name, "{\"dtype\": \"f32\", \"rank\": 1}");
        if (info.rank != 1 || info.dtype != DType::f32)
            fail("/reciprocal_band/alpha", "the alpha tensor " + key_text(name) + " is declared as " +
                                               dtype_name(info.dtype) + ", rank " + std::to_string(info.rank) +
                                               "; it is an f32 tensor of rank 1, [Hq]");
        const int width = read_int("/reciprocal_band/width", c->at("width"), "\"width\"");
        bool causal = true;
        if (c->contains("causal")) {
            const Json& k = c->at("causal");
            if (!k.is_boolean())
                fail("/reciprocal_band/causal", "\"causal\" is true or false; found " + describe(k));
            causal = k.get<bool>();
        }
        check(spec.reciprocal_band(width, name, causal), "/reciprocal_band");
    }

    // "latent": null, or {"dim": int, "w_qlat": name, "w_vup": name}: two declared tensors of the
    // spec's dtype and rank 3, [Hq, Dqk, L] and [Hq, L, Dv].
    void read_latent(AttentionSpec& spec) const {
        const Json* c = member("latent");
        if (!c || c->is_null()) return;
        if (!c->is_object())
            fail("/latent", "\"latent\" is {\"dim\": 512, \"w_qlat\": \"w_qlat\", \"w_vup\": \"w_vup\"} or null; found " +
                                describe(*c));
        for (const auto& [key, value] : c->items())
            if (std::find(kLatentKeys.begin(), kLatentKeys.end(), key) == kLatentKeys.end())
                fail_key(json_pointer("/latent", key),
                         "unknown key " + key_text(key) + " in \"latent\"; expected " + join(kLatentKeys));
        for (const auto& key : kLatentKeys)
            if (!c->contains(key)) fail("/latent", "\"latent\" needs \"" + key + "\" (keys: " + join(kLatentKeys) + ")");
        // Both projections are of the spec's dtype, like Q: [Hq, Dqk, L] and [Hq, L, Dv].
        const std::string declaration = "{\"dtype\": \"" + std::string(dtype_name(spec.dtype())) + "\", \"rank\": 3}";
        std::string names[2];
        for (int n = 0; n < 2; ++n) {
            const std::string key = n == 0 ? "w_qlat" : "w_vup", shape = n == 0 ? "[Hq, Dqk, L]" : "[Hq, L, Dv]";
            const std::string pointer = "/latent/" + key;
            const Json& t = c->at(key);
            if (!t.is_string())
                fail(pointer, "\"" + key + "\" is the name of the projection tensor " + shape + "; found " + describe(t));
            names[n] = t.get<std::string>();
            const TensorInfo& info = declared_tensor(pointer, names[n], declaration);
            if (info.rank != 3 || info.dtype != spec.dtype())
                fail(pointer, "the " + key + " tensor " + key_text(names[n]) + " is declared as " + dtype_name(info.dtype) +
                                  ", rank " + std::to_string(info.rank) + "; it is " + shape +
                                  " of the spec's dtype: " + declaration);
        }
        const int dim = read_int("/latent/dim", c->at("dim"), "\"dim\"");
        check(spec.latent(dim, names[0], names[1]), "/latent");
    }

    // "head_dim" for both, or "head_dim_qk" and "head_dim_v"; returns the key to blame.
    std::string read_head_dims(AttentionSpec& spec) const {
        const Json* both = member("head_dim");
        const Json* qk = member("head_dim_qk");
        const Json* v = member("head_dim_v");
        if (both && (qk || v))
            fail_key(qk ? "/head_dim_qk" : "/head_dim_v",
                     "give either \"head_dim\" (for both) or \"head_dim_qk\" and \"head_dim_v\", not both kinds");
        if (both) {
            int d = read_int("/head_dim", *both, "\"head_dim\"");
            spec.head_dim(d);
            return "/head_dim";
        }
        if (!qk && !v) fail("", "missing \"head_dim\" (or \"head_dim_qk\" and \"head_dim_v\"): a multiple of 8 from 8 to 256");
        if (!qk || !v)
            fail_key(qk ? "/head_dim_qk" : "/head_dim_v",
                     std::string(qk ? "\"head_dim_qk\" is given without \"head_dim_v\"" : "\"head_dim_v\" is given without \"head_dim_qk\"") +
                         "; give both, or \"head_dim\" for both");
        const int dqk = read_int("/head_dim_qk", *qk, "\"head_dim_qk\""), dv = read_int("/head_dim_v", *v, "\"head_dim_v\"");
        spec.head_dims(dqk, dv);
        // Blame the one that is unsupported on its own.
        if (AttentionSpec(spec).head_dims(dqk, dqk).why_invalid()) return "/head_dim_qk";
        return "/head_dim_v";
    }

    void check(const AttentionSpec& spec, const std::string& pointer) const {
        if (auto why = spec.why_invalid())
            fail(pointer, (pointer.empty() ? "" : key_text(last_key(pointer)) + ": ") + without_api_prefix(*why));
    }

    // A spec records exactly what its expressions read, so a declaration nothing reads
    // would not survive a round trip (and is most likely a typo).
    void check_all_declarations_used(const AttentionSpec& spec) const {
        const auto used_scalars = spec.scalars();
        const auto used_tensors = spec.tensors();
        for (const auto& [name, type] : names_.scalars)
            if (!used_scalars.count(name))
                fail_key(json_pointer("/scalars", name), "scalar \"" + name +
                                                             "\" is declared but neither score_mod nor mask reads it; "
                                                             "remove the declaration or use it");
        for (const auto& [name, info] : names_.tensors)
            if (!used_tensors.count(name))
                fail_key(json_pointer("/tensors", name), "tensor \"" + name +
                                                             "\" is declared but nothing reads it (score_mod, mask, sinks, gate, score_conv, "
                                                             "reciprocal_band, latent); "
                                                             "remove the declaration or use it");
    }

    std::string_view text_, source_;
    Json doc_;
    std::optional<JsonLocations> where_;
    ExprNames names_;
};

}  // namespace

void check_text_size(std::string_view text, std::string_view source_name) {
    if (text.size() <= kMaxSpecDocumentBytes) return;
    const std::string reason = "the document is " + std::to_string(text.size()) + " bytes, and the limit is " +
                               std::to_string(kMaxSpecDocumentBytes) + " (docs/spec_format.md, Limits)";
    throw SpecParseError(std::string(source_name) + ":1:1: " + reason, reason, 1, 1);
}

AttentionSpec spec_from_json(std::string_view json, std::string_view source_name) {
    return SpecReader(json, source_name).read();
}

std::string spec_to_json(const AttentionSpec& spec) {
    // Only specs that can be read back are written (an invalid one would fail on reading,
    // and a non-finite scale has no JSON number).
    if (auto why = spec.why_invalid()) user_error << "spec_to_json: the spec is invalid: " << *why;
    Json j;
    j["format"] = kFormat;
    j["dtype"] = dtype_name(spec.dtype());
    j["head_dim_qk"] = spec.head_dim_qk();
    j["head_dim_v"] = spec.head_dim_v();
    j["q_heads"] = spec.q_heads();
    j["kv_heads"] = spec.kv_heads();
    j["scale"] = spec.scale() ? Json(*spec.scale()) : Json(nullptr);
    j["return_lse"] = spec.returns_lse();
    j["scalars"] = Json::object();
    for (const auto& [name, type] : spec.scalars()) j["scalars"][name] = type_name(type);
    j["tensors"] = Json::object();
    for (const auto& [name, info] : spec.tensors())
        j["tensors"][name] = Json{{"dtype", dtype_name(info.dtype)}, {"rank", info.rank}};
    j["score_mod"] = spec.score_mod().defined() ? Json(to_string(spec.score_mod())) : Json(nullptr);
    j["mask"] = spec.mask().defined() ? Json(to_string(spec.mask())) : Json(nullptr);
    // Written only when present, so a document without sinks reads as it did before.
    if (spec.has_sinks()) j["sinks"] = spec.sinks_name();
    if (spec.has_gate()) j["gate"] = spec.gate_name();
    if (spec.has_score_conv())
        j["score_conv"] = Json{{"tensor", spec.score_conv_name()},
                               {"c_q", spec.score_conv_rows()},
                               {"c_k", spec.score_conv_cols()}};
    if (spec.has_reciprocal_band())
        j["reciprocal_band"] = Json{{"width", spec.reciprocal_band_width()},
                                    {"alpha", spec.reciprocal_band_alpha()},
                                    {"causal", spec.reciprocal_band_causal()}};
    if (spec.has_latent())
        j["latent"] = Json{{"dim", spec.latent_dim()}, {"w_qlat", spec.latent_w_qlat()}, {"w_vup", spec.latent_w_vup()}};
    return j.dump(2) + "\n";
}

}  // namespace attnjit::dsl
