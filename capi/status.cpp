// Exception -> attnjit_status translation and the per-thread last-error message.
#include "capi/status.h"

#include <new>
#include <string>

#include "dsl/spec_json.h"
#include "runtime/compile_failure.h"

namespace attnjit::capi {
namespace {

thread_local std::string last_error_message;
thread_local bool last_error_lost = false;  // the last message could not be stored

// attnjit's own messages start with "attnjit: "; the C API names the function instead.
std::string_view without_library_prefix(std::string_view m) {
    constexpr std::string_view prefix = "attnjit: ";
    if (m.substr(0, prefix.size()) == prefix) m.remove_prefix(prefix.size());
    return m;
}

constexpr const char* kReport = " This is a bug in attnjit; please report it with this message.";

}  // namespace

attnjit_status fail(attnjit_status status, const char* function, std::string_view message) noexcept {
    try {
        std::string m = function;
        m += ": ";
        m += without_library_prefix(message);
        last_error_message.swap(m);
        last_error_lost = false;
    } catch (...) {
        last_error_lost = true;
    }
    return status;
}

attnjit_status fail_with_current_exception(const char* function) noexcept {
    try {
        throw;
    } catch (const dsl::SpecParseError& e) {
        return fail(ATTNJIT_ERROR_PARSE, function, e.what());
    } catch (const UserError& e) {
        return fail(ATTNJIT_ERROR_INVALID_ARGUMENT, function, e.what());
    } catch (const runtime::CompileFailure& e) {
        // NVRTC rejected code attnjit generated: attnjit's bug (the message says so).
        return fail(ATTNJIT_ERROR_INTERNAL, function, e.what());
    } catch (const EnvironmentError& e) {
        return fail(ATTNJIT_ERROR_ENVIRONMENT, function, e.what());
    } catch (const InternalError& e) {  // its message already says it is a bug
        return fail(ATTNJIT_ERROR_INTERNAL, function, e.what());
    } catch (const std::bad_alloc&) {
        return fail(ATTNJIT_ERROR_INTERNAL, function,
                    std::string("internal error: out of host memory (std::bad_alloc). If memory was not "
                                "exhausted, this is a bug in attnjit; please report it."));
    } catch (const std::exception& e) {
        return fail(ATTNJIT_ERROR_INTERNAL, function,
                    std::string("internal error: unexpected exception: ") + e.what() + "." + kReport);
    } catch (...) {
        return fail(ATTNJIT_ERROR_INTERNAL, function,
                    std::string("internal error: an exception of unknown type.") + kReport);
    }
}

}  // namespace attnjit::capi

using attnjit::capi::last_error_lost;
using attnjit::capi::last_error_message;

extern "C" {

const char* attnjit_last_error(void) {
    if (last_error_lost) return "attnjit: the last error's message could not be stored (out of host memory)";
    return last_error_message.c_str();
}

const char* attnjit_status_name(int32_t status) {
    switch (status) {
    case ATTNJIT_OK: return "ATTNJIT_OK";
    case ATTNJIT_ERROR_INVALID_ARGUMENT: return "ATTNJIT_ERROR_INVALID_ARGUMENT";
    case ATTNJIT_ERROR_PARSE: return "ATTNJIT_ERROR_PARSE";
    case ATTNJIT_ERROR_ENVIRONMENT: return "ATTNJIT_ERROR_ENVIRONMENT";
    case ATTNJIT_ERROR_INTERNAL: return "ATTNJIT_ERROR_INTERNAL";
    }
    return "ATTNJIT_UNKNOWN_STATUS";
}

}  // extern "C"
