#include "shardwise/core/shape.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

TEST(Shape, ParsesCommaLists) {
  EXPECT_EQ(parse_shape("8,16"), (Shape{8, 16}));
  EXPECT_EQ(parse_shape(" 8 , 16 "), (Shape{8, 16}));
  EXPECT_EQ(parse_shape("(8, 16)"), (Shape{8, 16}));
  EXPECT_EQ(parse_shape("[8,16,]"), (Shape{8, 16}));
  EXPECT_EQ(parse_shape("0"), (Shape{0}));
  EXPECT_EQ(parse_shape(""), Shape{});
  EXPECT_EQ(parse_shape("()"), Shape{});
}

TEST(Shape, ParseErrorsNameTheProblem) {
  EXPECT_THAT(error_of([] { parse_shape("8,-1"); }),
              HasSubstr("dimension 1 has size -1, expected a size >= 0"));
  EXPECT_THAT(error_of([] { parse_shape("8,x"); }),
              HasSubstr("cannot parse shape '8,x': expected an integer but found 'x' at column 3"));
  EXPECT_THAT(error_of([] { parse_shape("(8,16"); }), HasSubstr("expected ')'"));
  EXPECT_THAT(error_of([] { parse_shape("8 16"); }), HasSubstr("unexpected '16'"));
}

TEST(Shape, PrintsLikePythonTuples) {
  EXPECT_EQ(to_string(Shape{8, 16}), "(8, 16)");
  EXPECT_EQ(to_string(Shape{8}), "(8,)");
  EXPECT_EQ(to_string(Shape{}), "()");
}

TEST(Shape, CountsElements) {
  EXPECT_EQ(num_elements(Shape{8, 16}), 128);
  EXPECT_EQ(num_elements(Shape{}), 1);
  EXPECT_EQ(num_elements(Shape{3, 0}), 0);
}

TEST(ShardIndex, PrintsIntersectsAndMeasures) {
  ShardIndex a{{0, 4}, {2, 10}};
  ShardIndex b{{2, 6}, {8, 12}};
  EXPECT_EQ(to_string(a), "[0:4, 2:10]");
  EXPECT_EQ(intersect(a, b), (ShardIndex{{2, 4}, {8, 10}}));
  EXPECT_THAT(shape_of(a), ElementsAre(4, 8));
  ShardIndex apart{{4, 8}, {0, 2}};
  EXPECT_TRUE(is_empty(intersect(a, apart)));
  EXPECT_FALSE(is_empty(a));
  EXPECT_THAT(shape_of(intersect(a, apart)), ElementsAre(0, 0));
}

}  // namespace
}  // namespace shardwise
