// EXPECT_USER_ERROR itself: it must fail when nothing is thrown, when the wrong kind is
// thrown, and when the message lacks the substring.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "support/error.h"
#include "tests/common/expect_error.h"

namespace attnjit {
namespace {

void user(const char* msg) { user_error << msg; }
void internal(const char* msg) { internal_error << msg; }
void environment(const char* msg) { environment_error << msg; }
void nothing() {}

TEST(ExpectUserError, PassesOnUserErrorWithTheSubstring) { EXPECT_USER_ERROR(user("tensor 'bias' is bad"), "'bias'"); }

TEST(ExpectUserError, FailsWhenNothingIsThrown) {
    EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(nothing(), "x"), "did not throw");
}

TEST(ExpectUserError, FailsOnInternalError) {
    EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(internal("tensor 'bias'"), "'bias'"),
                            "threw InternalError instead of UserError");
}

TEST(ExpectUserError, FailsOnEnvironmentError) {
    EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(environment("x"), "x"), "threw EnvironmentError");
}

TEST(ExpectUserError, FailsOnOtherExceptions) {
    EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(throw std::runtime_error("x"), "x"), "non-attnjit exception");
}

TEST(ExpectUserError, FailsWhenTheMessageLacksTheSubstring) {
    EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(user("tensor 'bias' is bad"), "'slopes'"), "lacks \"'slopes'\"");
}

}  // namespace
}  // namespace attnjit
