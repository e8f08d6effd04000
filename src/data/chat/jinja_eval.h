// Renders a parsed template: statements write to an output string, expressions compute values, with
// jinja2's scoping (a loop iteration, a macro call and a block each get a frame; `if` does not).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/chat/jinja_ast.h"
#include "data/chat/jinja_value.h"

namespace pt::jinja {

// The variables of one scope; lookups go up through `parent`.
struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<int, Value>> vars;
  bool captured = false;  // a macro defined here (or below) may still look names up in it: never reuse

  const Value* find(int sym) const {
    for (const auto& [s, v] : vars)
      if (s == sym) return &v;
    return nullptr;
  }
  void set(int sym, Value v);
};

// Frames for one render, reused as scopes end. Every frame lives until the render ends, so a macro's
// closure never dangles.
class FramePool {
 public:
  Frame* acquire(Frame* parent);
  void release(Frame* f);

 private:
  std::vector<std::unique_ptr<Frame>> all_;
  std::vector<Frame*> free_;
};

// Arguments of a call, evaluated.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string_view, Value>> keywords;
  std::vector<Value> owners;  // keep alive the strings that keyword names from **kwargs point into

  const Value* keyword(std::string_view name) const;
};

// Binds `args` to a Python signature `names` (positional-or-keyword, in order): out[i] is the argument
// for names[i], or null. Failure for surplus or unknown arguments, as Python reports them.
void bind(const CallArgs& args, std::string_view function, std::initializer_list<std::string_view> names,
          const Value** out);

// Arguments of builtins: `v` null when absent; Failure when of the wrong type.
int64_t int_arg(const Value* v, int64_t absent, std::string_view what);
bool bool_arg(const Value* v, bool absent);
std::string_view str_arg(const Value* v, std::string_view absent, std::string_view what);

class Evaluator {
 public:
  Evaluator(const Program& program, std::string_view source, const std::string& origin,
            std::chrono::system_clock::time_point now);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Renders the program with `root` holding the context's variables. Errors are TemplateErrors.
  void render(Frame* root, std::string& out, std::vector<std::pair<size_t, size_t>>& generation);
  FramePool& frames() { return frames_; }

  // For filters, tests, methods and globals.
  Value call(const Value& callee, CallArgs& args);
  std::chrono::system_clock::time_point now() const { return now_; }
  // A namespace or loop this render made: its references are dropped when the render ends.
  template <class T>
  std::shared_ptr<T> make_mutable() {
    auto obj = std::make_shared<T>();
    mutables_.push_back(obj);
    return obj;
  }

 private:
  enum class Flow : uint8_t { Normal, Break, Continue };

  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const struct ForStmt& s);
  void exec_call_block(const struct CallBlockStmt& s);
  // Runs `body` in a child frame with the output captured.
  std::string capture(const Body& body);
  void assign(Frame& frame, const Target& target, const Value& value);

  Value eval(const Expr& e);
  Value eval_name(const NameExpr& e);
  Value eval_call(const CallExpr& e, Value* caller);
  Value eval_filter(const FilterExpr& e);
  void eval_args(const Args& a, CallArgs& out);
  Value call_macro(const CallableObj& m, CallArgs& args);
  Value make_macro(const MacroStmt& m);

  const Program& program_;
  std::string_view source_;
  const std::string& origin_;
  std::chrono::system_clock::time_point now_;
  FramePool frames_;
  Frame* frame_ = nullptr;
  std::string* out_ = nullptr;   // where output goes now (a macro's or block's buffer, or the root)
  std::string* root_ = nullptr;  // the rendered text
  std::vector<std::pair<size_t, size_t>>* generation_ = nullptr;
  const Value* filter_input_ = nullptr;  // the body's output inside a {% filter %} or block {% set %}
  uint32_t pos_ = 0;                     // the node being evaluated, for error locations
  int call_depth_ = 0;
  std::vector<std::weak_ptr<Object>> mutables_;
};

// Implemented by jinja_filters.cpp, jinja_tests.cpp, jinja_methods.cpp and jinja_globals.cpp.
Value run_filter(Evaluator& ev, FilterId id, const Value& operand, CallArgs& args);
bool run_test(Evaluator& ev, TestId id, const Value& operand, CallArgs& args);
Value run_method(Evaluator& ev, const Value& self, MethodId id, CallArgs& args);
Value run_global(Evaluator& ev, const CallableObj& fn, CallArgs& args);
// Methods of the callables above (dict.fromkeys, a cycler's next() and reset()).
Value run_callable_method(Evaluator& ev, const CallableObj& fn, MethodId id, CallArgs& args);

}  // namespace pt::jinja
