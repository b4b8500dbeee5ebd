// The statements of a chat template, rendered as jinja2 renders them: a loop's body gets a
// fresh scope each iteration (so `set` inside a loop is lost when the iteration ends, which is
// why templates use namespace()), a for's `else` runs when nothing was iterated, `loop` holds
// jinja2's loop variables, and a generation block records the bytes it rendered.

#include "text/detail/chat_template_builtins.hpp"
#include "text/detail/chat_template_renderer.hpp"

namespace shardwise::text::detail::chat {
namespace {

// Pushes a scope for the life of a loop iteration or macro call.
class ScopeGuard {
 public:
  explicit ScopeGuard(std::vector<std::shared_ptr<Dict>>& scopes) : scopes_(scopes) {
    scopes_.push_back(std::make_shared<Dict>());
  }
  ~ScopeGuard() { scopes_.pop_back(); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  std::vector<std::shared_ptr<Dict>>& scopes_;
};

Dict loop_variables(const List& items, std::size_t i) {
  const auto n = static_cast<std::int64_t>(items.size());
  const auto k = static_cast<std::int64_t>(i);
  Dict loop;
  loop.set("index", Value::of_int(k + 1));
  loop.set("index0", Value::of_int(k));
  loop.set("revindex", Value::of_int(n - k));
  loop.set("revindex0", Value::of_int(n - k - 1));
  loop.set("first", Value::of_bool(k == 0));
  loop.set("last", Value::of_bool(k == n - 1));
  loop.set("length", Value::of_int(n));
  loop.set("depth", Value::of_int(1));
  loop.set("depth0", Value::of_int(0));
  loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  loop.set("nextitem", k + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
  loop.set("cycle", Value::of_function("cycle", [i](CallArgs& a) {
             if (a.positional.empty()) fail("no items for cycling given");
             return a.positional[i % a.positional.size()];
           }));
  return loop;
}

}  // namespace

Renderer::Renderer(const ChatProgram& program, Value context, const ChatRenderOptions& options)
    : program_(program), options_(options) {
  if (options.now) {
    now_ = *options.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now_);
  }
  scopes_.push_back(context.dict ? std::make_shared<Dict>(*context.dict)
                                 : std::make_shared<Dict>());
}

RenderedChat Renderer::run() {
  render_body(program_.body);
  return RenderedChat{std::move(output_), std::move(generation_)};
}

Value Renderer::lookup(const std::string& name) {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
    if (const Value* v = (*scope)->find(name)) return *v;
  }
  if (std::optional<Value> f = global_function(name, now_)) return *f;
  return Value::undefined("'" + name + "' is undefined");
}

void Renderer::assign(const std::string& name, Value value) {
  scopes_.back()->set(name, std::move(value));
}

void Renderer::unpack(const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    assign(targets[0], value);
    return;
  }
  const List items = iterate(value);
  if (items.size() != targets.size()) {
    fail("cannot unpack " + std::to_string(items.size()) + " values into " +
         std::to_string(targets.size()) + " names");
  }
  for (std::size_t i = 0; i < targets.size(); ++i) assign(targets[i], items[i]);
}

void Renderer::emit(const std::string& text) {
  out_->append(text);
  if (out_->size() > options_.limits.max_output_bytes) {
    fail("the output exceeds the bound of " + std::to_string(options_.limits.max_output_bytes) +
         " bytes");
  }
}

void Renderer::count_iteration() {
  if (++iterations_ > options_.limits.max_loop_iterations) {
    fail("the template's loops ran more than " +
         std::to_string(options_.limits.max_loop_iterations) + " iterations");
  }
}

Renderer::Flow Renderer::render_body(const Body& body) {
  for (const Node& node : body) {
    const Flow flow = render_node(node);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::render_node(const Node& node) {
  try {
    switch (node.kind) {
      case NodeKind::kText: emit(node.text); break;
      case NodeKind::kOutput: emit(py_str(eval(*node.expr))); break;
      case NodeKind::kIf:
        for (const auto& [condition, body] : node.branches) {
          if (!condition || truthy(eval(*condition))) return render_body(body);
        }
        break;
      case NodeKind::kFor: render_for(node); break;
      case NodeKind::kSet: render_set(node); break;
      case NodeKind::kSetBlock: {
        std::string captured;
        std::string* saved = out_;
        out_ = &captured;
        render_body(node.body);
        out_ = saved;
        assign(node.targets[0], Value::of_string(std::move(captured)));
        break;
      }
      case NodeKind::kMacro: define_macro(node); break;
      case NodeKind::kGeneration: {
        const std::size_t begin = out_->size();
        const Flow flow = render_body(node.body);
        generation_.push_back(GenerationRange{begin, out_->size()});
        return flow;
      }
      case NodeKind::kBreak: return Flow::kBreak;
      case NodeKind::kContinue: return Flow::kContinue;
    }
  } catch (Failure& f) {
    if (!f.located) {
      f.located = true;
      f.line = node.pos.line;
      f.column = node.pos.column;
    }
    throw;
  }
  return Flow::kNormal;
}

void Renderer::render_for(const Node& node) {
  List items = iterate(eval(*node.expr));
  if (node.filter) {
    List kept;
    for (const Value& item : items) {
      count_iteration();
      ScopeGuard scope(scopes_);
      unpack(node.targets, item);
      if (truthy(eval(*node.filter))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    count_iteration();
    ScopeGuard scope(scopes_);
    if (node.uses_loop) assign("loop", Value::of_dict(loop_variables(items, i)));
    unpack(node.targets, items[i]);
    if (render_body(node.body) == Flow::kBreak) break;
  }
  if (items.empty()) render_body(node.else_body);
}

void Renderer::render_set(const Node& node) {
  Value value = eval(*node.expr);
  if (node.attribute.empty()) {
    unpack(node.targets, value);
    return;
  }
  const Value target = lookup(node.targets[0]);
  if (!target.is(Kind::kNamespace)) {
    fail("can only assign an attribute of a namespace, and '" + node.targets[0] + "' is a " +
         type_name(target));
  }
  if (node.attribute[0] == '_') {
    fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
         node.attribute + "'");
  }
  target.dict->set(node.attribute, std::move(value));
}

void Renderer::define_macro(const Node& node) {
  assign(node.targets[0], Value::of_function(node.targets[0], [this, &node](CallArgs& args) {
           return call_macro(node, args);
         }));
}

Value Renderer::call_macro(const Node& node, CallArgs& args) {
  if (call_depth_ >= options_.limits.max_call_depth) {
    fail("macros call each other deeper than " + std::to_string(options_.limits.max_call_depth) +
         " levels");
  }
  if (args.positional.size() > node.params.size()) {
    fail("macro '" + node.targets[0] + "' takes not more than " +
         std::to_string(node.params.size()) + " argument(s)");
  }
  for (const auto& [name, value] : args.named) {
    bool known = false;
    for (const auto& param : node.params) known = known || param.first == name;
    if (!known) fail("macro '" + node.targets[0] + "' takes no keyword argument '" + name + "'");
  }
  std::vector<std::shared_ptr<Dict>> saved_scopes = scopes_;
  std::string* saved_out = out_;
  std::string captured;
  scopes_.resize(1);  // a macro sees the top level and its arguments
  scopes_.push_back(std::make_shared<Dict>());
  ++call_depth_;
  try {
    for (std::size_t i = 0; i < node.params.size(); ++i) {
      const auto& [name, fallback] = node.params[i];
      std::optional<Value> v = args.get(i, name);
      if (!v)
        v = fallback ? eval(*fallback)
                     : Value::undefined("parameter '" + name + "' was not provided");
      assign(name, *v);
    }
    out_ = &captured;
    render_body(node.body);
  } catch (...) {
    scopes_ = std::move(saved_scopes);
    out_ = saved_out;
    --call_depth_;
    throw;
  }
  scopes_ = std::move(saved_scopes);
  out_ = saved_out;
  --call_depth_;
  return Value::of_string(std::move(captured));
}

}  // namespace shardwise::text::detail::chat
