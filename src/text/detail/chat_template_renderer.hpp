#pragma once
// One render of a parsed chat template: the scopes of variables as jinja2 keeps them (a loop's
// body gets fresh names each iteration; `set` inside a loop does not leave it; a macro sees
// the template's top level and its arguments), the output, and the bounds that keep a hostile
// template from hanging or exhausting memory. Expressions: chat_template_eval.cpp; statements:
// chat_template_render.cpp.

#include <cstddef>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/text/chat_template.hpp"
#include "text/detail/chat_template_ast.hpp"

namespace shardwise::text::detail {

struct ChatProgram {
  std::string what;
  chat::Body body;
  bool has_generation = false;
};

namespace chat {

class Renderer {
 public:
  Renderer(const ChatProgram& program, Value context, const ChatRenderOptions& options);
  RenderedChat run();

  Value eval(const Expr& e);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow render_body(const Body& body);
  Flow render_node(const Node& node);
  void render_for(const Node& node);
  void render_set(const Node& node);
  void define_macro(const Node& node);
  Value call_macro(const Node& node, CallArgs& args);
  void emit(const std::string& text);
  void count_iteration();

  Value lookup(const std::string& name);
  void assign(const std::string& name, Value value);
  void unpack(const std::vector<std::string>& targets, const Value& value);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_call(const Expr& e);
  CallArgs eval_args(const Expr& e, std::size_t first);

  const ChatProgram& program_;
  ChatRenderOptions options_;
  std::tm now_{};
  std::vector<std::shared_ptr<Dict>> scopes_;  // [0]: the context and the top level's names
  std::string output_;
  std::string* out_ = &output_;  // where text goes: the output, or a set block's or macro's
  std::vector<GenerationRange> generation_;
  std::size_t iterations_ = 0;
  std::size_t call_depth_ = 0;
};

}  // namespace chat
}  // namespace shardwise::text::detail
