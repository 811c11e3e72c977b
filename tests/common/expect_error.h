// EXPECT_USER_ERROR(statement, "substring"): the statement must throw attnjit::UserError
// whose message contains the substring (after Halide's expect_user_error). It fails when
// nothing is thrown, when another kind is thrown (an InternalError means attnjit blamed
// itself for the user's mistake), or when the message does not name what it should.
// ASSERT_USER_ERROR is the fatal form.
//
// The statement is a macro argument: wrap it in parentheses if it has a top-level comma
// outside parentheses (e.g. a braced initializer list).
#pragma once

#include <exception>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "support/error.h"

namespace attnjit::testing {

inline ::testing::AssertionResult throws_user_error(const std::function<void()>& f, const std::string& substring,
                                                    const char* text) {
    try {
        f();
    } catch (const UserError& e) {
        std::string msg = e.what();
        if (msg.find(substring) != std::string::npos) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << text << "\n  threw UserError as expected, but its message lacks \""
                                             << substring << "\":\n  " << msg;
    } catch (const InternalError& e) {
        return ::testing::AssertionFailure() << text << "\n  threw InternalError instead of UserError:\n  "
                                             << e.what();
    } catch (const EnvironmentError& e) {
        return ::testing::AssertionFailure() << text << "\n  threw EnvironmentError instead of UserError:\n  "
                                             << e.what();
    } catch (const std::exception& e) {
        return ::testing::AssertionFailure() << text << "\n  threw a non-attnjit exception instead of UserError:\n  "
                                             << e.what();
    } catch (...) {
        return ::testing::AssertionFailure() << text << "\n  threw something that is not a std::exception";
    }
    return ::testing::AssertionFailure() << text << "\n  did not throw (expected UserError containing \""
                                         << substring << "\")";
}

}  // namespace attnjit::testing

#define EXPECT_USER_ERROR(stmt, substring) \
    EXPECT_TRUE(::attnjit::testing::throws_user_error([&]() { (void)(stmt); }, (substring), #stmt))
#define ASSERT_USER_ERROR(stmt, substring) \
    ASSERT_TRUE(::attnjit::testing::throws_user_error([&]() { (void)(stmt); }, (substring), #stmt))
