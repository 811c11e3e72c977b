// Numbered source excerpts and the parsing of NVRTC's blame lines.
#include <gtest/gtest.h>

#include "runtime/source_excerpt.h"

namespace attnjit::runtime {
namespace {

TEST(SourceExcerpt, FindsErrorLinesOfTheMainFileOnly) {
    const std::string log =
        "fwd.cu(12): error: identifier \"x\" is undefined\n"
        "attnjit/forward/kernel.cuh(40): error: no instance of function template\n"
        "          detected during instantiation of \"f<T>\" at line 7 of fwd.cu\n"
        "myfwd.cu(99): error: should not match\n"
        "fwd.cu(12): error: repeated\n";
    EXPECT_EQ(error_lines(log, "fwd.cu"), (std::vector<int>{7, 12}));
    EXPECT_TRUE(error_lines("", "fwd.cu").empty());
}

TEST(SourceExcerpt, ShortSourceIsShownWholeWithMarks) {
    std::string out = numbered_excerpt("a\nb\nc\n", {2});
    EXPECT_EQ(out, "  1 | a\n> 2 | b\n  3 | c\n");
}

TEST(SourceExcerpt, LongSourceShowsContextAroundMarks) {
    std::string src;
    for (int i = 1; i <= 200; ++i) src += "line" + std::to_string(i) + "\n";
    std::string out = numbered_excerpt(src, {50, 150}, 2);
    EXPECT_NE(out.find(">  50 | line50\n"), std::string::npos) << out;
    EXPECT_NE(out.find("   48 | line48\n"), std::string::npos);
    EXPECT_NE(out.find("   52 | line52\n"), std::string::npos);
    EXPECT_EQ(out.find("line47\n"), std::string::npos);
    EXPECT_EQ(out.find("line100\n"), std::string::npos);
    EXPECT_NE(out.find("    ...\n"), std::string::npos);
}

TEST(SourceExcerpt, LongSourceWithoutMarksShowsTheBeginning) {
    std::string src;
    for (int i = 1; i <= 200; ++i) src += "l" + std::to_string(i) + "\n";
    std::string out = numbered_excerpt(src, {}, 3, 10);
    EXPECT_NE(out.find(" 10 | l10\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("l11\n"), std::string::npos);
}

}  // namespace
}  // namespace attnjit::runtime
