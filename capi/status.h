// How every C entry point reports failure: run the body, turn any exception into an
// attnjit_status and a per-thread message that starts with the function's name. Nothing
// escapes: the translation itself is noexcept and has a catch-all.
#pragma once

#include <string_view>

#include "attnjit/attnjit_c.h"
#include "support/error.h"

namespace attnjit::capi {

// Records `message` (prefixed with "<function>: ") as this thread's last error and
// returns `status`. Never throws; if even the message cannot be stored, a fixed one is.
attnjit_status fail(attnjit_status status, const char* function, std::string_view message) noexcept;

// Maps the exception being handled to a status (see capi/README.md) and records its message.
// Call only inside a catch block.
attnjit_status fail_with_current_exception(const char* function) noexcept;

// The usual shape of an entry point: `return guarded("attnjit_x", [&] { ... });`. Inside,
// argument checks are user_check (ATTNJIT_ERROR_INVALID_ARGUMENT) with a message that
// names the argument and what to pass instead.
template <class Body>
attnjit_status guarded(const char* function, Body&& body) noexcept {
    try {
        body();
        return ATTNJIT_OK;
    } catch (...) {
        return fail_with_current_exception(function);
    }
}

}  // namespace attnjit::capi

