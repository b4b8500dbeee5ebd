#pragma once
// A JSON reader that refuses an object holding one key twice: JSON parsers keep the last value
// and drop the first in silence, so {"n_layer": 1, "n_layer": 12} would be read as 12 layers
// without a word.
//
// It builds the document from nlohmann's SAX events itself, in time linear in the text: each
// key is looked up once in the object being built. (nlohmann's callback parser, used before,
// rescans the parent object each time a nested object closes: quadratic in the number of
// object-valued keys, 40 s for a 749 KB file of 40k of them.)

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise::detail {

template <typename Json>
class BasicUniqueKeys {
 public:
  // Parses `text`; a repeated key is a ParseError naming it and `what`; a syntax error is
  // nlohmann's parse_error, as json::parse throws it.
  static Json parse(std::string_view text, std::string_view what) {
    BasicUniqueKeys builder(what);
    Json::sax_parse(text.begin(), text.end(), &builder);
    return std::move(builder.root_);
  }

  // The SAX interface (nlohmann::json_sax).
  bool null() { return put_value(nullptr); }
  bool boolean(bool value) { return put_value(value); }
  bool number_integer(typename Json::number_integer_t value) { return put_value(value); }
  bool number_unsigned(typename Json::number_unsigned_t value) { return put_value(value); }
  bool number_float(typename Json::number_float_t value, const std::string& /*text*/) {
    return put_value(value);
  }
  bool string(std::string& value) { return put_value(std::move(value)); }
  bool binary(typename Json::binary_t& value) { return put_value(Json::binary(value)); }
  bool start_object(std::size_t /*elements*/) {
    check_depth();
    open_.push_back(put(Json::object()));
    return true;
  }
  bool key(std::string& name) {
    Json& object = *open_.back();
    // An ordered object finds a key by walking its keys: bounded, so that a line of a million
    // keys is refused rather than read in quadratic time.
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      if (object.size() >= kMaxOrderedKeys) {
        throw ParseError(what_ + " has an object of more than " + std::to_string(kMaxOrderedKeys) +
                         " keys");
      }
    }
    if (object.contains(name)) {
      throw ParseError(what_ + " has the key \"" + echo_input(name, 100) +
                       "\" twice in one object");
    }
    slot_ = &object[name];
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) {
    check_depth();
    open_.push_back(put(Json::array()));
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  // Thrown as the parser made it (parse_error; out_of_range for 1e999), as json::parse does.
  template <typename Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const Exception& error) {
    throw error;
  }

 private:
  explicit BasicUniqueKeys(std::string_view what) : what_(what) {}

  // Stores a value where the document expects it (the root, the key just read, or the end of
  // the open array) and returns where it now lives.
  template <typename Value>
  Json* put(Value&& value) {
    if (open_.empty()) {
      root_ = Json(std::forward<Value>(value));
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.emplace_back(std::forward<Value>(value));
      return &parent.back();
    }
    *slot_ = Json(std::forward<Value>(value));
    return slot_;
  }
  template <typename Value>
  bool put_value(Value&& value) {
    put(std::forward<Value>(value));
    return true;
  }

  std::string what_;
  Json root_;
  // The objects and arrays open at this point, outermost first.
  std::vector<Json*> open_;
  // Deeper documents are refused: nlohmann's dump() and destructor recurse once per level, and
  // 100000 levels (200 KB of brackets) overflow the stack.
  static constexpr std::size_t kMaxDepth = 256;
  static constexpr std::size_t kMaxOrderedKeys = 256;
  void check_depth() const {
    if (open_.size() >= kMaxDepth) {
      throw ParseError(what_ + " nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
  }
  // The value of the key read last in the innermost open object.
  Json* slot_ = nullptr;
};

// nlohmann::json (keys sorted), and ordered_json (keys in the text's order: what a chat template
// iterating a message's keys, or `tojson`, sees).
using UniqueKeys = BasicUniqueKeys<nlohmann::json>;
using OrderedUniqueKeys = BasicUniqueKeys<nlohmann::ordered_json>;

}  // namespace shardwise::detail
