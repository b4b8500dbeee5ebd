// ChatTemplate: parse, check every filter and test is one the engine computes, render; and the
// readers of a model folder's template and special tokens.
//
// Why our own interpreter: no maintained C++ Jinja library is packaged in Debian 12 (apt-cache
// search finds only Python's jinja2 and its plug-ins, no inja or jinja2cpp), and third-party
// source is not copied into this repository.

#include "shardwise/text/chat_template.hpp"

#include "detail/file_io.hpp"
#include "shardwise/core/error.hpp"
#include "text/detail/chat_template_builtins.hpp"
#include "text/detail/chat_template_renderer.hpp"
#include "text/detail/utf8.hpp"

namespace shardwise::text {
namespace {

using detail::chat::Body;
using detail::chat::Expr;
using detail::chat::ExprKind;
using detail::chat::Pos;

// Published templates are a few kilobytes; this bounds what a hostile file can make us parse.
constexpr std::size_t kMaxTemplateBytes = std::size_t{1} << 20;

std::string where(const std::string& what, Pos pos) {
  return "chat template " + what + " line " + std::to_string(pos.line) + ":" +
         std::to_string(pos.column);
}

// jinja2 refuses an unknown filter or test when it compiles the template; so do we.
void check_names(const Expr& e) {
  if (e.kind == ExprKind::kFilter && !detail::chat::is_known_filter(e.name)) {
    throw detail::chat::SyntaxFailure{"the filter '" + e.name + "' is not implemented", e.pos};
  }
  if (e.kind == ExprKind::kTest && !detail::chat::is_known_test(e.name)) {
    throw detail::chat::SyntaxFailure{"the test '" + e.name + "' is not implemented", e.pos};
  }
  for (const auto& a : e.args) {
    if (a) check_names(*a);
  }
  for (const auto& [name, a] : e.named) check_names(*a);
}

void check_names(const Body& body) {
  for (const auto& node : body) {
    if (node.expr) check_names(*node.expr);
    if (node.filter) check_names(*node.filter);
    for (const auto& [condition, branch] : node.branches) {
      if (condition) check_names(*condition);
      check_names(branch);
    }
    for (const auto& [name, fallback] : node.params) {
      if (fallback) check_names(*fallback);
    }
    check_names(node.body);
    check_names(node.else_body);
  }
}

RenderedChat render_program(const detail::ChatProgram& program,
                            const nlohmann::ordered_json& context,
                            const ChatRenderOptions& options) {
  if (!context.is_object()) {
    throw InvalidArgument("chat template " + program.what +
                          ": the context must be a JSON object, not " +
                          std::string(context.type_name()));
  }
  try {
    detail::chat::Renderer renderer(program, detail::chat::from_json(context), options);
    return renderer.run();
  } catch (const detail::chat::Failure& f) {
    const std::string place =
        f.located ? where(program.what, Pos{f.line, f.column}) : "chat template " + program.what;
    if (f.raised_by_template) throw InvalidArgument(place + " raised: " + f.message);
    throw InvalidArgument(place + ": " + f.message);
  }
}

}  // namespace

ChatTemplate::ChatTemplate(std::shared_ptr<const detail::ChatProgram> program)
    : program_(std::move(program)) {}

ChatTemplate ChatTemplate::parse(std::string_view source, const std::string& what) {
  const std::string name = "'" + what + "'";
  if (source.size() > kMaxTemplateBytes) {
    throw InvalidArgument("chat template " + name + " has " + std::to_string(source.size()) +
                          " bytes, more than the bound of " + std::to_string(kMaxTemplateBytes));
  }
  auto program = std::make_shared<detail::ChatProgram>();
  program->what = name;
  try {
    detail::require_utf8(source, "chat template " + name);
    program->body =
        detail::chat::parse_template(detail::chat::lex_template(source), program->has_generation);
    check_names(program->body);
  } catch (const detail::chat::SyntaxFailure& f) {
    throw InvalidArgument(where(name, f.pos) + ": " + f.message);
  } catch (const detail::chat::Failure& f) {
    throw InvalidArgument("chat template " + name + ": " + f.message);
  }
  return ChatTemplate(std::move(program));
}

std::string ChatTemplate::render(const nlohmann::json& context,
                                 const ChatRenderOptions& options) const {
  return render(nlohmann::ordered_json::parse(context.dump()), options);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context,
                                 const ChatRenderOptions& options) const {
  return render_program(*program_, context, options).text;
}

RenderedChat ChatTemplate::render_with_generation_ranges(const nlohmann::ordered_json& context,
                                                         const ChatRenderOptions& options) const {
  return render_program(*program_, context, options);
}

const std::string& ChatTemplate::what() const { return program_->what; }
bool ChatTemplate::has_generation_blocks() const { return program_->has_generation; }

nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages,
                                    bool add_generation_prompt,
                                    const nlohmann::ordered_json& special_tokens,
                                    const nlohmann::ordered_json& variables) {
  if (!messages.is_array()) {
    throw InvalidArgument("messages must be a list, not " + std::string(messages.type_name()));
  }
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  nlohmann::ordered_json kept = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& message = messages[i];
    if (!message.is_object()) {
      throw InvalidArgument("message " + std::to_string(i) + " must be an object, not " +
                            std::string(message.type_name()));
    }
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [key, value] : message.items()) {
      if (!value.is_null()) m[key] = value;  // transformers drops keys whose value is None
    }
    kept.push_back(std::move(m));
  }
  // The order transformers passes them in: special tokens first, then the call's own names.
  if (special_tokens.is_object()) {
    for (const auto& [key, value] : special_tokens.items()) context[key] = value;
  }
  context["messages"] = std::move(kept);
  context["tools"] = nullptr;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  if (variables.is_object()) {
    for (const auto& [key, value] : variables.items()) context[key] = value;
  }
  return context;
}

}  // namespace shardwise::text
