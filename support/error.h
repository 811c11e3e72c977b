// The checks that throw attnjit's exceptions (support/exceptions.h). Internal: the public
// headers include only exceptions.h, so these lowercase macros never reach a user's code.
//
//   user_check(ok) << "what was wrong; what to do";      UserError
//   internal_check(ok) << "what broke";                   InternalError (a bug in attnjit)
//   environment_check(ok) << "what the driver said";      EnvironmentError
//   user_error << "...";  (and internal_error, environment_error): throw unconditionally
#pragma once

#include <sstream>
#include <string>

#include "support/exceptions.h"

namespace attnjit {

namespace detail {

// Collects a message with operator<<; Thrower's operator& then throws it. A check costs
// nothing unless it fails: `user_check(ok) << "what was wrong; what to do";`.
template <class E>
class ErrorReporter {
public:
    ErrorReporter(const char* file, int line, const char* condition)
        : file_(file), line_(line), condition_(condition) {}
    ErrorReporter(const ErrorReporter&) = delete;
    template <class T>
    ErrorReporter& operator<<(const T& x) {
        msg_ << x;
        return *this;
    }

    std::string finish() const;

private:
    const char* file_;
    int line_;
    const char* condition_;
    std::ostringstream msg_;
};

// `&` binds looser than `<<`, so the whole message is collected before this throws (never
// from a destructor: the reporter is an ordinary temporary).
struct Thrower {
    template <class E>
    [[noreturn]] void operator&(const ErrorReporter<E>& r) const {
        throw E(r.finish());
    }
};

template <>
std::string ErrorReporter<UserError>::finish() const;
template <>
std::string ErrorReporter<InternalError>::finish() const;
template <>
std::string ErrorReporter<EnvironmentError>::finish() const;

}  // namespace detail
}  // namespace attnjit

// `if (!cond) throw` with a streamed message, usable as one expression.
#define ATTNJIT_CHECK_IMPL(kind, cond)                                                    \
    (cond) ? (void)0                                                                       \
           : ::attnjit::detail::Thrower() &                                                \
                 ::attnjit::detail::ErrorReporter<::attnjit::kind>(__FILE__, __LINE__, #cond)

#define user_check(cond) ATTNJIT_CHECK_IMPL(UserError, cond)
#define internal_check(cond) ATTNJIT_CHECK_IMPL(InternalError, cond)
#define environment_check(cond) ATTNJIT_CHECK_IMPL(EnvironmentError, cond)
#define user_error ATTNJIT_CHECK_IMPL(UserError, false)
#define internal_error ATTNJIT_CHECK_IMPL(InternalError, false)
#define environment_error ATTNJIT_CHECK_IMPL(EnvironmentError, false)
