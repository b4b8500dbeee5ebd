#include "shardwise/core/partition_spec.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unordered_set>

#include "error_of.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

TEST(PartitionSpec, EntriesAreCanonical) {
  // JAX: () is None and ('x',) is 'x'.
  EXPECT_EQ(P({SpecEntry(std::vector<std::string>{})}), P({None}));
  EXPECT_EQ(P({SpecEntry{"x"}}), P({"x"}));
  EXPECT_EQ(P({SpecEntry(std::vector<std::string>{"x"})}).to_string(), "P('x')");
  EXPECT_TRUE(None.is_replicated());
  EXPECT_FALSE(SpecEntry("x").is_replicated());
}

TEST(PartitionSpec, PrintsCanonically) {
  EXPECT_EQ(P().to_string(), "P()");
  EXPECT_EQ((P{"data", None, {"fsdp", "model"}}).to_string(), "P('data', None, ('fsdp', 'model'))");
  EXPECT_EQ((P{None}).to_string(), "P(None)");
}

TEST(PartitionSpec, ParsesEveryForm) {
  const P expected{"data", None, {"fsdp", "model"}};
  EXPECT_EQ(P::parse("P('data', None, ('fsdp', 'model'))"), expected);
  EXPECT_EQ(P::parse("PartitionSpec('data', None, ('fsdp', 'model'))"), expected);
  EXPECT_EQ(P::parse("'data', None, ('fsdp', 'model')"), expected);
  EXPECT_EQ(P::parse("P(\"data\", None, (\"fsdp\", 'model'))"), expected);
  EXPECT_EQ(P::parse("P(data, None, (fsdp, model))"), expected);
  EXPECT_EQ(P::parse("  P ( 'data' ,None,('fsdp','model') , )  "), expected);
}

TEST(PartitionSpec, ParseCanonicalises) {
  EXPECT_EQ(P::parse("P(())"), P{None});
  EXPECT_EQ(P::parse("P(('x',))"), P{"x"});
  EXPECT_EQ(P::parse("P(('x'))"), P{"x"});
  EXPECT_EQ(P::parse("P()"), P());
  EXPECT_EQ(P::parse(""), P());
  // A quoted 'None' is an axis called None; a bare P is an axis called P.
  EXPECT_EQ(P::parse("P('None')").entry(0).axes(), std::vector<std::string>{"None"});
  EXPECT_EQ(P::parse("P, x"), (P{"P", "x"}));
}

TEST(PartitionSpec, RoundTrips) {
  for (const P& spec : {P(), P{None}, P{"a"}, P{"a", None}, P{{"a", "b"}, None, "c"},
                        P{None, None, {"z", "y", "x"}}, P{"None"}}) {
    EXPECT_EQ(P::parse(spec.to_string()), spec) << spec.to_string();
  }
}

// Found by the spec fuzzer: a quoted name holding a quote printed back as text that did not
// parse. Axis names are identifiers, as mesh axes are.
TEST(PartitionSpec, QuotedNamesMustBeIdentifiers) {
  const std::string with_nul = std::string("P(\"") + '\0' + "d', 'a\")";
  EXPECT_THAT(error_of([&] { P::parse(with_nul); }), HasSubstr("is not an identifier"));
  EXPECT_THAT(error_of([] { P::parse("P('a b')"); }),
              HasSubstr("axis name 'a b' is not an identifier"));
  EXPECT_EQ(P::parse("P(\"data\")"), P{"data"});
}

TEST(PartitionSpec, ParseErrors) {
  EXPECT_THAT(error_of([] { P::parse("P(('a', ('b', 'c')))"); }),
              HasSubstr("nested tuples are not allowed"));
  EXPECT_THAT(error_of([] { P::parse("P(('a', None))"); }),
              HasSubstr("None is not allowed inside a tuple"));
  EXPECT_THAT(error_of([] { P::parse("P('a'"); }), HasSubstr("expected ')'"));
  EXPECT_THAT(error_of([] { P::parse("P('a)"); }), HasSubstr("unterminated string"));
  EXPECT_THAT(error_of([] { P::parse("P('a' 'b')"); }), HasSubstr("expected ')' but found ''b')'"));
  EXPECT_THAT(error_of([] { P::parse("P('')"); }), HasSubstr("axis names must not be empty"));
  EXPECT_THAT(error_of([] { P::parse("P(1)"); }),
              HasSubstr("cannot parse partition spec 'P(1)': expected an axis name, None or a "
                        "tuple of axes but found '1)' at column 3"));
  EXPECT_THAT(error_of([] { P::parse("P('a'))"); }), HasSubstr("unexpected ')'"));
  EXPECT_THROW(P::parse("P(,)"), ParseError);
}

TEST(PartitionSpec, Accessors) {
  const P spec{"data", None, {"fsdp", "model"}};
  EXPECT_EQ(spec.size(), 3u);
  EXPECT_EQ(spec.entry(1), None);
  EXPECT_EQ(spec.entry(7), None);  // past the end: replicated
  EXPECT_THAT(spec.all_axes(), ElementsAre("data", "fsdp", "model"));
  EXPECT_EQ(spec.dimension_of("model"), 2);
  EXPECT_EQ(spec.dimension_of("pipeline"), -1);
}

TEST(PartitionSpec, EqualityIsPerEntryAndHashAgrees) {
  // As in JAX, a trailing None is part of the spec's value (the layouts are equivalent).
  EXPECT_NE((P{"x", None}), P{"x"});
  EXPECT_NE((P{{"x", "y"}}), (P{{"y", "x"}}));
  std::unordered_set<P> set{P{"x"}, P::parse("P('x')"), P{"x", None}, P{{"x", "y"}}};
  EXPECT_EQ(set.size(), 3u);
}

}  // namespace
}  // namespace shardwise
