// Reading JSON is linear in the text: 200k object-valued keys, a 400k-parameter manifest and a
// safetensors header of 200k tensors are read in well under a second here. (The reader before
// rescanned an object's keys each time a nested object in it closed: 40k such keys took 40 s,
// and these would take hours.) CTest runs these under a timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "detail/json_reader.hpp"
#include "error_of.hpp"
#include "shardwise/plan/model_shape.hpp"
#include "shardwise/strategy/model_manifest.hpp"

namespace shardwise {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

std::string object_valued_keys(int count) {
  std::string text = "{";
  for (int i = 0; i < count; ++i) {
    text += (i ? ", \"k" : "\"k") + std::to_string(i) + "\": {\"a\": [" + std::to_string(i) + "]}";
  }
  return text + "}";
}

TEST(JsonScaling, TwoHundredThousandObjectValuedKeysAreReadInLinearTime) {
  const nlohmann::json json = detail::parse_json(object_valued_keys(200'000), "keys");
  ASSERT_EQ(json.size(), 200'000U);
  EXPECT_EQ(json["k199999"]["a"][0], 199'999);
}

TEST(JsonScaling, ARepeatedKeyIsStillRefusedAtAnyDepthAndAfterManyKeys) {
  std::string text = object_valued_keys(100'000);
  text.back() = ',';
  EXPECT_THAT(error_of([&] { (void)detail::parse_json(text + " \"k5\": {}}", "rules"); }),
              HasSubstr("rules has the key \"k5\" twice in one object"));
  EXPECT_THAT(error_of([] {
                (void)detail::parse_json(R"([{"a": {"b": 1, "c": {"b": 2}, "b": 3}}])", "x");
              }),
              HasSubstr("x has the key \"b\" twice in one object"));
  // The same key in sibling objects and in an array of objects is no repeat.
  const nlohmann::json fine =
      detail::parse_json(R"({"a": {"n": 1}, "b": {"n": 2}, "c": [{"n": 3}, {"n": 4}]})", "x");
  EXPECT_EQ(fine["c"][1]["n"], 4);
  EXPECT_THAT(error_of([] { (void)detail::parse_json("{\"a\": [1, 2}", "x"); }),
              HasSubstr("invalid JSON in x"));
  EXPECT_THAT(error_of([] { (void)detail::parse_json("[1e999]", "x"); }),
              HasSubstr("invalid JSON in x"));
}

// A million levels of brackets are refused at the 257th, at once and without recursion: a
// document that deep would overflow the stack of the JSON library's recursive dump (which error
// messages use to echo a value).
TEST(JsonScaling, ADeeplyNestedDocumentIsRefusedWithoutRecursion) {
  constexpr int kDepth = 1'000'000;
  const std::string text = std::string(kDepth, '[') + std::string(kDepth, ']');
  EXPECT_THAT(error_of([&] { (void)detail::parse_json(text, "nested"); }),
              HasSubstr("nested nests deeper than 256 levels"));
  const std::string allowed = std::string(256, '[') + std::string(256, ']');
  EXPECT_TRUE(detail::parse_json(allowed, "nested").is_array());
}

TEST(JsonScaling, AManifestOfFourHundredThousandParametersIsReadInLinearTime) {
  std::string text = R"({"parameters": [{"name": "wte", "shape": [256, 64], "dtype": "f32"})";
  for (int i = 0; i < 400'000; ++i) {
    text += R"(, {"name": "layers.)" + std::to_string(i) +
            R"(.mlp.w", "shape": [64, 64], "dtype": "bf16", "logical_axes": ["embed", "mlp"]})";
  }
  text += R"(], "axis_units": {"heads": 16}})";
  const ModelManifest manifest = load_model_description(text);
  ASSERT_EQ(manifest.parameters.size(), 400'001U);
  const plan::ModelShape shape = plan::shape_of(manifest);
  EXPECT_EQ(shape.layers, 400'000);
}

TEST(JsonScaling, ASafetensorsHeaderOfTwoHundredThousandTensorsIsReadInLinearTime) {
  std::string header =
      R"({"__metadata__": {"format": "pt"}, "wte": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]})";
  std::uint64_t offset = 32;
  for (int i = 0; i < 200'000; ++i) {
    header += R"(, "h.)" + std::to_string(i) +
              R"(.mlp.c_fc.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [)" +
              std::to_string(offset) + ", " + std::to_string(offset + 16) + "]}";
    offset += 16;
  }
  header += "}";
  const ModelManifest manifest = plan::manifest_from_safetensors_header(header, offset);
  EXPECT_EQ(manifest.parameters.size(), 200'001U);
}

}  // namespace
}  // namespace shardwise
