#include "data/chat/jinja_eval.h"

#include <array>

#include "data/chat/jinja_error.h"
#include "data/chat/jinja_ops.h"

namespace pt::jinja {

namespace {

// Python stops runaway recursion; so do we, well before the C++ stack would.
constexpr int kMaxCallDepth = 200;

const Value& global_value(GlobalId id) {
  static const auto values = [] {
    std::array<Value, 16> v;
    for (int i = 1; i <= static_cast<int>(GlobalId::Lipsum); ++i) {
      auto c = std::make_shared<CallableObj>();
      c->kind = CallableKind::Global;
      c->id = i;
      v[static_cast<size_t>(i)] = Value::callable(std::move(c));
    }
    return v;
  }();
  return values[static_cast<size_t>(id)];
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::Eq:
      return equals(a, b);
    case CompareOp::Ne:
      return !equals(a, b);
    case CompareOp::Lt:
      return ordered(a, b, Order::Lt);
    case CompareOp::Le:
      return ordered(a, b, Order::Le);
    case CompareOp::Gt:
      return ordered(a, b, Order::Gt);
    case CompareOp::Ge:
      return ordered(a, b, Order::Ge);
    case CompareOp::In:
      return contains(b, a);
    default:
      return !contains(b, a);
  }
}

}  // namespace

void Frame::set(int sym, Value v) {
  for (auto& [s, x] : vars) {
    if (s == sym) {
      x = std::move(v);
      return;
    }
  }
  vars.emplace_back(sym, std::move(v));
}

Frame* FramePool::acquire(Frame* parent) {
  Frame* f;
  if (free_.empty()) {
    all_.push_back(std::make_unique<Frame>());
    f = all_.back().get();
  } else {
    f = free_.back();
    free_.pop_back();
  }
  f->parent = parent;
  f->captured = false;
  return f;
}

void FramePool::release(Frame* f) {
  if (f->captured) return;
  f->vars.clear();
  free_.push_back(f);
}

const Value* CallArgs::keyword(std::string_view name) const {
  for (const auto& [k, v] : keywords)
    if (k == name) return &v;
  return nullptr;
}

void bind(const CallArgs& args, std::string_view function, std::initializer_list<std::string_view> names,
          const Value** out) {
  size_t n = names.size();
  for (size_t i = 0; i < n; ++i) out[i] = nullptr;
  if (args.positional.size() > n)
    raise_failure(std::string(function) + "() takes at most " + std::to_string(n) + " argument(s) (" +
                  std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = &args.positional[i];
  for (const auto& [k, v] : args.keywords) {
    size_t j = 0;
    for (auto name : names) {
      if (name == k) break;
      ++j;
    }
    if (j == n)
      raise_failure(std::string(function) + "() got an unexpected keyword argument '" + std::string(k) + "'");
    if (out[j])
      raise_failure(std::string(function) + "() got multiple values for argument '" + std::string(k) + "'");
    out[j] = &v;
  }
}

int64_t int_arg(const Value* v, int64_t absent, std::string_view what) {
  if (!v || v->is_none()) return absent;
  if (v->is_undefined()) fail_undefined(*v);
  if (!v->is_integral())
    raise_failure(std::string(what) + ": '" + type_name(*v) + "' object cannot be interpreted as an integer");
  return v->as_int();
}

bool bool_arg(const Value* v, bool absent) { return v ? truthy(*v) : absent; }

std::string_view str_arg(const Value* v, std::string_view absent, std::string_view what) {
  if (!v) return absent;
  if (v->is_undefined()) fail_undefined(*v);
  if (!v->is_string()) raise_failure(std::string(what) + ": expected a string, not '" + type_name(*v) + "'");
  return v->str();
}

Evaluator::Evaluator(const Program& program, std::string_view source, const std::string& origin,
                     std::chrono::system_clock::time_point now)
    : program_(program), source_(source), origin_(origin), now_(now) {}

Evaluator::~Evaluator() {
  for (const auto& weak : mutables_)
    if (auto obj = weak.lock()) obj->drop_references();
}

void Evaluator::render(Frame* root, std::string& out, std::vector<std::pair<size_t, size_t>>& generation) {
  start_work();
  frame_ = root;
  out_ = root_ = &out;
  generation_ = &generation;
  try {
    exec(program_.body);
  } catch (const Failure& f) {
    throw_at(origin_, source_, pos_, f.what(), f.raised_by_template);
  }
}

// --- statements ---

Evaluator::Flow Evaluator::exec(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Evaluator::capture(const Body& body) {
  std::string buf;
  std::string* saved_out = out_;
  Frame* saved_frame = frame_;
  out_ = &buf;
  frame_ = frames_.acquire(saved_frame);
  exec(body);
  frames_.release(frame_);
  frame_ = saved_frame;
  out_ = saved_out;
  return buf;
}

Evaluator::Flow Evaluator::exec(const Stmt& s) {
  pos_ = s.pos;
  switch (s.kind) {
    case StmtKind::Text:
      out_->append(static_cast<const TextStmt&>(s).text);
      check_built_size(out_->size(), "the rendered text");
      return Flow::Normal;
    case StmtKind::Print: {
      Value v = eval(*static_cast<const PrintStmt&>(s).expr);
      append_str(*out_, v);
      check_built_size(out_->size(), "the rendered text");
      return Flow::Normal;
    }
    case StmtKind::If: {
      const auto& n = static_cast<const IfStmt&>(s);
      for (const auto& [test, body] : n.branches)
        if (truthy(eval(*test))) return exec(body);
      return exec(n.otherwise);
    }
    case StmtKind::For:
      return exec_for(static_cast<const ForStmt&>(s));
    case StmtKind::Set: {
      const auto& n = static_cast<const SetStmt&>(s);
      Value v = eval(*n.value);
      pos_ = s.pos;
      assign(*frame_, n.target, v);
      return Flow::Normal;
    }
    case StmtKind::SetBlock: {
      const auto& n = static_cast<const SetBlockStmt&>(s);
      Value v = Value::string(capture(n.body));
      if (n.filter) {
        const Value* saved = filter_input_;
        filter_input_ = &v;
        Value filtered = eval(*n.filter);
        filter_input_ = saved;
        v = std::move(filtered);
      }
      pos_ = s.pos;
      assign(*frame_, n.target, v);
      return Flow::Normal;
    }
    case StmtKind::Macro: {
      const auto& n = static_cast<const MacroStmt&>(s);
      frame_->set(n.sym, make_macro(n));
      return Flow::Normal;
    }
    case StmtKind::CallBlock:
      exec_call_block(static_cast<const CallBlockStmt&>(s));
      return Flow::Normal;
    case StmtKind::FilterBlock: {
      const auto& n = static_cast<const FilterBlockStmt&>(s);
      Value body = Value::string(capture(n.body));
      const Value* saved = filter_input_;
      filter_input_ = &body;
      Value v = eval(*n.filter);
      filter_input_ = saved;
      append_str(*out_, v);
      return Flow::Normal;
    }
    case StmtKind::With: {
      const auto& n = static_cast<const WithStmt&>(s);
      std::vector<Value> values;
      for (const auto& a : n.assignments) values.push_back(eval(*a.second));
      Frame* outer = frame_;
      Frame* f = frames_.acquire(outer);
      for (size_t i = 0; i < values.size(); ++i) assign(*f, n.assignments[i].first, values[i]);
      frame_ = f;
      Flow flow = exec(n.body);
      frame_ = outer;
      frames_.release(f);
      return flow;
    }
    case StmtKind::Break:
      return Flow::Break;
    case StmtKind::Continue:
      return Flow::Continue;
    case StmtKind::Generation: {
      // HF records where the block's output starts in the text rendered so far (the root output, even
      // when the block sits inside a macro) and how long it is.
      std::string text = capture(static_cast<const GenerationStmt&>(s).body);
      size_t start = root_->size();
      out_->append(text);
      generation_->emplace_back(start, start + text.size());
      return Flow::Normal;
    }
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec_for(const ForStmt& s) {
  Value seq = eval(*s.iter);
  pos_ = s.pos;
  std::vector<Value> scratch;
  const std::vector<Value>& all = iterate(seq, scratch);
  auto loop = make_mutable<LoopObj>();
  Frame* outer = frame_;
  Frame* f = frames_.acquire(outer);
  if (s.filter) {
    // jinja2 filters lazily; filtering up front sees the same items unless the body changes what the
    // condition reads.
    for (const Value& item : all) {
      charge_work(1);
      f->vars.clear();
      assign(*f, s.target, item);
      frame_ = f;
      bool keep = truthy(eval(*s.filter));
      frame_ = outer;
      if (keep) loop->items.push_back(item);
    }
  } else if (&all == &scratch) {
    loop->items = std::move(scratch);
  } else {
    loop->items = all;
  }
  Value loop_value = Value::loop(loop);
  // jinja2 runs the else block unless some iteration reached the end of the body (break and continue
  // skip that point).
  bool run_else = true;
  for (size_t i = 0; i < loop->items.size(); ++i) {
    charge_work(1);
    if (f->captured)
      f = frames_.acquire(outer);
    else
      f->vars.clear();
    loop->index = i;
    f->set(s.loop_sym, loop_value);
    pos_ = s.pos;
    assign(*f, s.target, loop->items[i]);
    frame_ = f;
    Flow flow = exec(s.body);
    frame_ = outer;
    if (flow == Flow::Break) break;
    if (flow == Flow::Continue) continue;
    run_else = false;
  }
  frames_.release(f);
  if (!run_else || s.otherwise.empty()) return Flow::Normal;
  Frame* e = frames_.acquire(outer);
  frame_ = e;
  Flow flow = exec(s.otherwise);
  frame_ = outer;
  frames_.release(e);
  return flow;
}

void Evaluator::exec_call_block(const CallBlockStmt& s) {
  Value caller = make_macro(*s.caller);
  Value result = eval_call(static_cast<const CallExpr&>(*s.call), &caller);
  append_str(*out_, result);
}

void Evaluator::assign(Frame& frame, const Target& t, const Value& value) {
  switch (t.type) {
    case Target::Type::Name:
      frame.set(t.sym, value);
      return;
    case Target::Type::NamespaceAttr: {
      const Value* ns = nullptr;
      for (Frame* f = &frame; f && !ns; f = f->parent) ns = f->find(t.sym);
      if (!ns || ns->kind() != Kind::Namespace)
        raise_failure("cannot assign attribute on non-namespace object");
      if (!t.attr.empty() && t.attr[0] == '_')
        raise_failure("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                      t.attr + "'");
      NamespaceObj& obj = ns->namespace_obj();
      if (Value* v = obj.find(t.attr))
        *v = value;
      else
        obj.attrs.emplace_back(t.attr, value);
      return;
    }
    case Target::Type::Tuple: {
      std::vector<Value> scratch;
      const auto& items = iterate(value, scratch);
      size_t n = t.items.size();
      if (items.size() > n) raise_failure("too many values to unpack (expected " + std::to_string(n) + ")");
      if (items.size() < n)
        raise_failure("not enough values to unpack (expected " + std::to_string(n) + ", got " +
                      std::to_string(items.size()) + ")");
      for (size_t i = 0; i < n; ++i) assign(frame, t.items[i], items[i]);
      return;
    }
  }
}

// --- expressions ---

Value Evaluator::eval_name(const NameExpr& e) {
  for (const Frame* f = frame_; f; f = f->parent)
    if (const Value* v = f->find(e.sym)) return *v;
  if (e.global != GlobalId::None) return global_value(e.global);
  return Value::undefined(Missing::Name, &e.name);
}

void Evaluator::eval_args(const Args& a, CallArgs& out) {
  out.positional.reserve(a.positional.size());
  for (const auto& p : a.positional) out.positional.push_back(eval(*p));
  if (a.star) {
    Value v = eval(*a.star);
    std::vector<Value> scratch;
    for (const Value& x : iterate(v, scratch)) out.positional.push_back(x);
  }
  for (const auto& [k, v] : a.keywords) out.keywords.emplace_back(k, eval(*v));
  if (a.starstar) {
    Value v = eval(*a.starstar);
    if (v.kind() != Kind::Dict)
      raise_failure(std::string("argument after ** must be a mapping, not ") + type_name(v));
    for (const auto& [k, x] : v.dict_obj().items) {
      if (!k.is_string()) raise_failure("keywords must be strings");
      out.keywords.emplace_back(k.str(), x);
    }
    out.owners.push_back(std::move(v));
  }
}

Value Evaluator::make_macro(const MacroStmt& m) {
  // The macro resolves names in this frame and its parents whenever it is called: keep them all.
  for (Frame* f = frame_; f; f = f->parent) f->captured = true;
  auto c = std::make_shared<CallableObj>();
  c->kind = CallableKind::Macro;
  c->macro = &m;
  c->closure = frame_;
  return Value::callable(std::move(c));
}

Value Evaluator::call_macro(const CallableObj& c, CallArgs& args) {
  const MacroStmt& m = *c.macro;
  if (call_depth_ >= kMaxCallDepth)
    raise_failure("maximum recursion depth exceeded calling macro '" + m.name + "'");
  // As jinja2's Macro.__call__: positional arguments first, then keywords for the remaining parameters;
  // missing ones take their defaults (evaluated in the macro's frame, after the earlier parameters).
  size_t np = m.params.size();
  size_t given = args.positional.size();
  std::vector<const Value*> bound(np, nullptr);
  for (size_t i = 0; i < given && i < np; ++i) bound[i] = &args.positional[i];
  std::vector<bool> used(args.keywords.size(), false);
  for (size_t i = given; i < np; ++i) {
    for (size_t k = 0; k < args.keywords.size(); ++k) {
      if (!used[k] && args.keywords[k].first == m.params[i].name) {
        bound[i] = &args.keywords[k].second;
        used[k] = true;
      }
    }
  }
  const Value* caller = nullptr;
  std::shared_ptr<DictObj> kwargs;  // the keywords left over, for `kwargs`
  for (size_t k = 0; k < args.keywords.size(); ++k) {
    if (used[k]) continue;
    const auto& [name, v] = args.keywords[k];
    if (name == "caller" && m.catch_caller && !caller) {
      caller = &v;
      continue;
    }
    if (!m.catch_kwargs) {
      if (name == "caller")
        raise_failure("macro '" + m.name + "' was invoked with two values for the special caller argument");
      raise_failure("macro '" + m.name + "' takes no keyword argument '" + std::string(name) + "'");
    }
    if (!kwargs) kwargs = std::make_shared<DictObj>();
    kwargs->items.emplace_back(Value::string(std::string(name)), v);
  }
  if (!m.catch_varargs && given > np)
    raise_failure("macro '" + m.name + "' takes not more than " + std::to_string(np) + " argument(s)");

  Frame* f = frames_.acquire(c.closure);
  Frame* saved_frame = frame_;
  frame_ = f;
  // Every parameter is a local of the macro before any default runs: a default that reads a parameter not
  // yet set sees it undefined, never an outer variable of the same name.
  for (size_t i = 0; i < np; ++i)
    f->set(m.params[i].sym, bound[i] ? *bound[i] : Value::undefined(Missing::Name, &m.params[i].name));
  for (size_t i = 0; i < np; ++i)
    if (!bound[i] && m.params[i].default_value) f->set(m.params[i].sym, eval(*m.params[i].default_value));
  if (m.catch_caller)
    f->set(m.caller_sym, caller ? *caller : Value::undefined(Missing::Hint, "No caller defined"));
  if (m.catch_kwargs)
    f->set(m.kwargs_sym, Value::dict(kwargs ? std::move(kwargs) : std::make_shared<DictObj>()));
  if (m.catch_varargs) {
    std::vector<Value> extra;
    for (size_t i = np; i < given; ++i) extra.push_back(args.positional[i]);
    f->set(m.varargs_sym, Value::tuple(std::move(extra)));
  }
  std::string buf;
  std::string* saved_out = out_;
  out_ = &buf;
  ++call_depth_;
  exec(m.body);
  --call_depth_;
  out_ = saved_out;
  frame_ = saved_frame;
  frames_.release(f);
  return Value::string(std::move(buf));
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  switch (callee.kind()) {
    case Kind::Undefined:
      fail_undefined(callee);
    case Kind::Callable: {
      const CallableObj& c = callee.callable_obj();
      switch (c.kind) {
        case CallableKind::Method:
          return run_method(*this, c.self, static_cast<MethodId>(c.id), args);
        case CallableKind::Macro:
          return call_macro(c, args);
        default:
          return run_global(*this, c, args);
      }
    }
    case Kind::Loop:
      raise_failure(
          "the loop must be marked as recursive to be called; packtrain does not support recursive loops");
    default:
      raise_failure(std::string("'") + type_name(callee) + "' object is not callable");
  }
}

Value Evaluator::eval_call(const CallExpr& e, Value* caller) {
  Value callee;
  if (e.callee->kind == ExprKind::GetAttr) {
    // obj.method(...): call the method directly instead of building a bound method first.
    const auto& ga = static_cast<const GetAttrExpr&>(*e.callee);
    Value self = eval(*ga.object);
    pos_ = ga.pos;
    if (ga.method != MethodId::None && has_method(self, ga.method)) {
      CallArgs args;
      eval_args(e.args, args);
      if (caller) args.keywords.emplace_back("caller", *caller);
      pos_ = e.pos;
      if (is_mutating(self, ga.method))
        raise_failure("access to attribute '" + ga.name + "' of '" + type_name(self) + "' object is unsafe.");
      return run_method(*this, self, ga.method, args);
    }
    callee = get_attr(self, ga.name, ga.method, &ga.name);
  } else {
    callee = eval(*e.callee);
  }
  CallArgs args;
  eval_args(e.args, args);
  if (caller) args.keywords.emplace_back("caller", *caller);
  pos_ = e.pos;
  return call(callee, args);
}

Value Evaluator::eval_filter(const FilterExpr& e) {
  Value operand = e.operand ? eval(*e.operand) : *filter_input_;
  CallArgs args;
  eval_args(e.args, args);
  pos_ = e.pos;
  if (e.kind == ExprKind::Filter) {
    if (e.filter == FilterId::Unknown) raise_failure("no filter named '" + e.name + "'");
    return run_filter(*this, e.filter, operand, args);
  }
  if (e.test == TestId::Unknown) raise_failure("no test named '" + e.name + "'");
  return Value::boolean(run_test(*this, e.test, operand, args));
}

Value Evaluator::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Const:
      return static_cast<const ConstExpr&>(e).value;
    case ExprKind::Name:
      return eval_name(static_cast<const NameExpr&>(e));
    case ExprKind::GetAttr: {
      const auto& n = static_cast<const GetAttrExpr&>(e);
      Value obj = eval(*n.object);
      pos_ = e.pos;
      return get_attr(obj, n.name, n.method, &n.name);
    }
    case ExprKind::GetItem: {
      const auto& n = static_cast<const GetItemExpr&>(e);
      Value obj = eval(*n.object);
      Value key = eval(*n.key);
      pos_ = e.pos;
      const std::string* name = nullptr;
      if (n.key->kind == ExprKind::Const && key.is_string())
        name = &static_cast<const StrObj*>(static_cast<const ConstExpr&>(*n.key).value.object())->s;
      return get_item(obj, key, name);
    }
    case ExprKind::Slice: {
      const auto& n = static_cast<const SliceExpr&>(e);
      Value obj = eval(*n.object);
      Value start = n.start ? eval(*n.start) : Value::none();
      Value stop = n.stop ? eval(*n.stop) : Value::none();
      Value step = n.step ? eval(*n.step) : Value::none();
      pos_ = e.pos;
      return slice(obj, start, stop, step, n.forgiving);
    }
    case ExprKind::Neg:
    case ExprKind::Pos:
    case ExprKind::Not: {
      Value v = eval(*static_cast<const UnaryExpr&>(e).operand);
      pos_ = e.pos;
      if (e.kind == ExprKind::Not) return Value::boolean(!truthy(v));
      return e.kind == ExprKind::Neg ? negate(v) : positive(v);
    }
    case ExprKind::Binary: {
      const auto& n = static_cast<const BinaryExpr&>(e);
      Value l = eval(*n.left);
      Value r = eval(*n.right);
      pos_ = e.pos;
      return binary_op(n.op, l, r);
    }
    case ExprKind::And:
    case ExprKind::Or: {
      const auto& n = static_cast<const BinaryExpr&>(e);
      Value l = eval(*n.left);
      if (truthy(l) == (e.kind == ExprKind::Or)) return l;
      return eval(*n.right);
    }
    case ExprKind::Concat: {
      std::string s;
      for (const auto& item : static_cast<const ListExpr&>(e).items) append_str(s, eval(*item));
      charge_built(s.size(), true, "a ~ concatenation");
      return Value::string(std::move(s));
    }
    case ExprKind::Compare: {
      const auto& n = static_cast<const CompareExpr&>(e);
      Value left = eval(*n.first);
      for (const auto& [op, expr] : n.rest) {
        Value right = eval(*expr);
        pos_ = e.pos;
        if (!compare(op, left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::Cond: {
      const auto& n = static_cast<const CondExpr&>(e);
      if (truthy(eval(*n.test))) return eval(*n.then);
      if (n.otherwise) return eval(*n.otherwise);
      return Value::undefined(Missing::Hint,
                              "the inline if-expression evaluated to false and no else section was defined");
    }
    case ExprKind::Call:
      return eval_call(static_cast<const CallExpr&>(e), nullptr);
    case ExprKind::Filter:
    case ExprKind::Test:
      return eval_filter(static_cast<const FilterExpr&>(e));
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      const auto& n = static_cast<const ListExpr&>(e);
      items.reserve(n.items.size());
      for (const auto& item : n.items) items.push_back(eval(*item));
      return e.kind == ExprKind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::Dict: {
      auto d = std::make_shared<DictObj>();
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        Value key = eval(*k);
        if (key.kind() == Kind::List || key.kind() == Kind::Dict)
          raise_failure(std::string("unhashable type: '") + type_name(key) + "'");
        d->set(std::move(key), eval(*v));
      }
      return Value::dict(std::move(d));
    }
  }
  return Value();
}

}  // namespace pt::jinja
