// The functions a chat template can call by name: jinja2's range, joiner and cycler, and what transformers
// adds (dict, namespace, raise_exception, strftime_now).
#include "data/chat/jinja_builtins.h"
#include "data/chat/jinja_eval.h"
#include "data/chat/jinja_ops.h"
#include "data/chat/jinja_pyformat.h"

namespace pt::jinja {

namespace {

// The sandbox refuses ranges longer than this (jinja2's MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value range(const CallArgs& args) {
  if (!args.keywords.empty()) raise_failure("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3)
    raise_failure("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  for (const Value& v : p) {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_integral())
      raise_failure(std::string("'") + type_name(v) + "' object cannot be interpreted as an integer");
  }
  int64_t start = p.size() == 1 ? 0 : p[0].as_int();
  int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
  int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) raise_failure("range() arg 3 must not be zero");
  // In unsigned arithmetic: stop - start may pass int64 (range(-2**62, 2**62, 2**61) is four items).
  const uint64_t span = step > 0 ? (stop > start ? uint64_t(stop) - uint64_t(start) : 0)
                                 : (start > stop ? uint64_t(start) - uint64_t(stop) : 0);
  const uint64_t stride = step > 0 ? uint64_t(step) : 0 - uint64_t(step);
  const uint64_t count = span ? (span - 1) / stride + 1 : 0;
  if (count > uint64_t{kMaxRange})
    raise_failure("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                  std::to_string(kMaxRange) + ").");
  charge_work(count);
  auto l = std::make_shared<ListObj>();
  const auto n = static_cast<int64_t>(count);
  l->items.reserve(static_cast<size_t>(n));
  // start + i * step lies between start and stop; computed modulo 2^64 so that i * step cannot overflow.
  for (int64_t i = 0; i < n; ++i)
    l->items.push_back(Value::integer(static_cast<int64_t>(uint64_t(start) + uint64_t(i) * uint64_t(step))));
  l->flavor = Flavor::Range;
  l->range[0] = start;
  l->range[1] = stop;
  l->range[2] = step;
  return Value::list(std::move(l));
}

// dict(mapping_or_pairs, **kwargs) as Python builds it.
std::shared_ptr<DictObj> build_dict(const CallArgs& args, const char* name) {
  auto d = std::make_shared<DictObj>();
  if (args.positional.size() > 1)
    raise_failure(std::string(name) + " expected at most 1 argument, got " +
                  std::to_string(args.positional.size()));
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.kind() == Kind::Dict) {
      d->items = src.dict_obj().items;
    } else {
      std::vector<Value> scratch;
      for (const Value& pair : iterate(src, scratch)) {
        std::vector<Value> kv_scratch;
        const auto& kv = iterate(pair, kv_scratch);
        if (kv.size() != 2)
          raise_failure("dictionary update sequence element has length " + std::to_string(kv.size()) +
                        "; 2 is required");
        d->set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keywords) d->set(Value::string(std::string(k)), v);
  return d;
}

Value make_namespace(Evaluator& ev, const CallArgs& args) {
  auto d = build_dict(args, "namespace");
  auto ns = ev.make_mutable<NamespaceObj>();
  for (auto& [k, v] : d->items) {
    std::string key = to_str(k);
    // transformers' TemplateNamespace refuses private names (they reach Python internals).
    if (!key.empty() && key[0] == '_')
      raise_failure("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                    key + "'");
    ns->attrs.emplace_back(std::move(key), std::move(v));
  }
  return Value::namespace_(std::move(ns));
}

Value fromkeys(const CallArgs& args) {
  const Value* a[2];
  bind(args, "fromkeys", {"iterable", "value"}, a);
  if (!a[0]) raise_failure("fromkeys expected at least 1 argument, got 0");
  auto d = std::make_shared<DictObj>();
  std::vector<Value> scratch;
  for (const Value& k : iterate(*a[0], scratch)) d->set(k, a[1] ? *a[1] : Value::none());
  return Value::dict(std::move(d));
}

}  // namespace

Value run_global(Evaluator& ev, const CallableObj& fn, CallArgs& args) {
  if (fn.kind == CallableKind::Joiner) {
    // joiner(sep)(): nothing the first time, the separator afterwards.
    return fn.counter++ == 0 ? Value::string("") : fn.self;
  }
  if (fn.kind == CallableKind::Cycler) raise_failure("'Cycler' object is not callable");
  const Value* a[1];
  switch (static_cast<GlobalId>(fn.id)) {
    case GlobalId::Range:
      return range(args);
    case GlobalId::Dict:
      return Value::dict(build_dict(args, "dict"));
    case GlobalId::Namespace:
      return make_namespace(ev, args);
    case GlobalId::RaiseException:
      bind(args, "raise_exception", {"message"}, a);
      if (!a[0]) raise_failure("raise_exception() missing 1 required positional argument: 'message'");
      throw Failure(to_str(*a[0]), true);
    case GlobalId::StrftimeNow:
      bind(args, "strftime_now", {"format"}, a);
      if (!a[0]) raise_failure("strftime_now() missing 1 required positional argument: 'format'");
      return Value::string(strftime_local(str_arg(a[0], "", "strftime_now"), ev.now()));
    case GlobalId::Joiner: {
      bind(args, "joiner", {"sep"}, a);
      auto c = std::make_shared<CallableObj>();
      c->kind = CallableKind::Joiner;
      c->self = a[0] ? *a[0] : Value::string(", ");
      return Value::callable(std::move(c));
    }
    case GlobalId::Cycler: {
      if (!args.keywords.empty()) raise_failure("cycler() takes no keyword arguments");
      auto c = std::make_shared<CallableObj>();
      c->kind = CallableKind::Cycler;
      c->state = args.positional;
      return Value::callable(std::move(c));
    }
    case GlobalId::Lipsum:
      raise_failure("lipsum() is not supported by packtrain's template engine");
    default:
      break;
  }
  raise_failure("unknown global function");
}

Value run_callable_method(Evaluator&, const CallableObj& fn, MethodId id, CallArgs& args) {
  if (fn.kind == CallableKind::Global && static_cast<GlobalId>(fn.id) == GlobalId::Dict &&
      id == MethodId::Fromkeys)
    return fromkeys(args);
  if (fn.kind == CallableKind::Cycler && !fn.state.empty()) {
    if (id == MethodId::Reset) {
      fn.counter = 0;
      return Value::none();
    }
    if (id == MethodId::Next) return fn.state[fn.counter++ % fn.state.size()];
  }
  raise_failure(std::string("'function' object has no attribute '") + method_name(id) + "'");
}

}  // namespace pt::jinja
