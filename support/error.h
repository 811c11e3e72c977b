// Two kinds of error, never mixed (after Halide's Error.h):
//  - UserError: the caller did something wrong. The message says what, where, and what
//    to do instead. Subclasses say which stage noticed it.
//  - InternalError: attnjit itself is wrong. The message says so and asks for a report.
// CudaError (runtime) is a third kind: the driver, NVRTC or the GPU refused something.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace attnjit {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A mistake in how attnjit was used: bad DSL, bad spec, bad launch arguments.
class UserError : public Error {
public:
    using Error::Error;
};

// A bug in attnjit. Never caused by user input.
class InternalError : public Error {
public:
    using Error::Error;
};

// The environment failed: libcuda/libnvrtc missing, a CUDA call failed, NVRTC rejected
// generated code. Carries whatever log the failing component produced.
class EnvironmentError : public Error {
public:
    using Error::Error;
};

namespace detail {

// Collects a message with operator<< and throws when destroyed, so a check costs nothing
// unless it fails: `user_check(ok) << "what was wrong; what to do";`.
template <class E>
class ErrorReporter {
public:
    ErrorReporter(const char* file, int line, const char* condition)
        : file_(file), line_(line), condition_(condition) {}
    ErrorReporter(const ErrorReporter&) = delete;
    ~ErrorReporter() noexcept(false) { throw E(finish()); }
    template <class T>
    ErrorReporter& operator<<(const T& x) {
        msg_ << x;
        return *this;
    }

private:
    std::string finish() const;
    const char* file_;
    int line_;
    const char* condition_;
    std::ostringstream msg_;
};

struct Voidify {
    template <class T>
    void operator&(const T&) {}
};

template <>
std::string ErrorReporter<UserError>::finish() const;
template <>
std::string ErrorReporter<InternalError>::finish() const;
template <>
std::string ErrorReporter<EnvironmentError>::finish() const;

}  // namespace detail
}  // namespace attnjit

// `if (!cond) throw` with a streamed message, usable as one expression: `&` binds looser
// than `<<`, so the whole message is collected before the reporter is destroyed.
#define ATTNJIT_CHECK_IMPL(kind, cond)                                                    \
    (cond) ? (void)0                                                                       \
           : ::attnjit::detail::Voidify() &                                                \
                 ::attnjit::detail::ErrorReporter<::attnjit::kind>(__FILE__, __LINE__, #cond)

#define user_check(cond) ATTNJIT_CHECK_IMPL(UserError, cond)
#define internal_check(cond) ATTNJIT_CHECK_IMPL(InternalError, cond)
#define environment_check(cond) ATTNJIT_CHECK_IMPL(EnvironmentError, cond)
#define user_error ATTNJIT_CHECK_IMPL(UserError, false)
#define internal_error ATTNJIT_CHECK_IMPL(InternalError, false)
#define environment_error ATTNJIT_CHECK_IMPL(EnvironmentError, false)
