// The values a template computes with, modelled on the Python objects jinja2 hands templates: what they
// print as, how they compare and when they are true decide the rendered bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pt::jinja {

struct MacroStmt;
struct Frame;

enum class Kind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Tuple,
  Dict,
  Namespace,
  Callable,
  Loop
};

// Python types that behave as sequences but are not lists: they print, index, measure and test differently.
enum class Flavor : uint8_t {
  Plain,
  Generator,  // filters' lazy results: single pass, always true, no len()
  Iterator,   // reversed(list): like a generator, printed as an iterator
  DictKeys,
  DictValues,
  DictItems,
  Range,
};

// Why a value is undefined: what the error says when a template uses it.
enum class Missing : uint8_t { Name, Attribute, Item, Unsafe, Hint };

// A template failure before the evaluator knows where it happened; it adds origin, line and column.
struct Failure : std::runtime_error {
  explicit Failure(const std::string& message, bool raised = false)
      : std::runtime_error(message), raised_by_template(raised) {}
  bool raised_by_template;  // raise_exception() in the template
};

struct Object {
  virtual ~Object() = default;
  // Mutable objects (namespaces, loops) let a template make a reference cycle ({% set ns.me = ns %});
  // the evaluator calls this on them when its render ends, so the cycle's memory is freed.
  virtual void drop_references() {}
};

class Value;
struct StrObj;
struct ListObj;
struct DictObj;
struct NamespaceObj;
struct CallableObj;
struct LoopObj;

class Value {
 public:
  Value() : kind_(Kind::Undefined), aux_(0), owner_(Kind::Undefined), i_(0) {}
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  ~Value() {
    if (obj_ && kind_ != Kind::String) release(std::move(obj_));
  }

  static Value undefined(Missing why, const void* what = nullptr, Kind owner = Kind::Undefined);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s, bool markup = false);
  static Value string(std::shared_ptr<const StrObj> s, bool markup = false);
  static Value list(std::vector<Value> items, Flavor flavor = Flavor::Plain);
  static Value list(std::shared_ptr<ListObj> l);
  static Value tuple(std::vector<Value> items);
  static Value dict(std::shared_ptr<DictObj> d);
  static Value namespace_(std::shared_ptr<NamespaceObj> ns);
  static Value callable(std::shared_ptr<CallableObj> c);
  static Value loop(std::shared_ptr<LoopObj> l);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Bool || kind_ == Kind::Int; }
  bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_markup() const { return kind_ == Kind::String && aux_ != 0; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(f_) : i_; }
  double as_double() const { return kind_ == Kind::Float ? f_ : static_cast<double>(i_); }
  std::string_view str() const;
  const ListObj& list_obj() const;
  const std::vector<Value>& items() const;
  Flavor flavor() const;
  const DictObj& dict_obj() const;
  NamespaceObj& namespace_obj() const;
  const CallableObj& callable_obj() const;
  LoopObj& loop_obj() const;
  const Object* object() const { return obj_.get(); }

  Missing missing() const { return static_cast<Missing>(aux_); }
  Kind missing_owner() const { return owner_; }
  const void* missing_what() const { return p_; }

 private:
  // A template can nest values 10^5 deep in a loop ({% set ns.x = [ns.x] %}); dropping the outermost would
  // run one destructor per level, past the stack. As CPython's trashcan does, containers released while
  // another is being destroyed wait in a per-thread list that the outermost release empties in a loop.
  static void release(std::shared_ptr<Object> obj) noexcept;

  Kind kind_;
  uint8_t aux_;  // String: markup flag; Undefined: Missing
  Kind owner_;   // Undefined: kind of the object that lacked the attribute
  union {
    int64_t i_;
    double f_;
    const void* p_;  // Undefined: the name (std::string*) or hint (char*)
  };
  std::shared_ptr<Object> obj_;
};

struct StrObj final : Object {
  explicit StrObj(std::string v) : s(std::move(v)) {}
  std::string s;
};

struct ListObj final : Object {
  std::vector<Value> items;
  Flavor flavor = Flavor::Plain;
  mutable size_t next = 0;       // generators and iterators run once: items before `next` are used up
  int64_t range[3] = {0, 0, 1};  // Range: start, stop, step (for printing)
};

struct DictObj final : Object {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts or replaces, keeping the first insertion's position as Python dicts do.
  void set(Value key, Value value);
};

struct NamespaceObj final : Object {
  std::vector<std::pair<std::string, Value>> attrs;
  Value* find(std::string_view name);
  void drop_references() override { attrs.clear(); }
};

enum class CallableKind : uint8_t { Global, Method, Macro, Joiner, Cycler };

struct CallableObj final : Object {
  CallableKind kind = CallableKind::Global;
  int id = 0;  // Global: GlobalId; Method: MethodId
  Value self;  // Method: the receiver; Joiner: the separator
  const MacroStmt* macro = nullptr;
  Frame* closure = nullptr;    // the frame the macro was defined in (names resolve there when called)
  std::vector<Value> state;    // Cycler: its items
  mutable size_t counter = 0;  // Joiner: calls so far; Cycler: position
};

struct LoopObj final : Object {
  std::vector<Value> items;
  size_t index = 0;
  Value last_changed;
  bool changed_called = false;
  void drop_references() override {
    items.clear();
    last_changed = Value();
  }
};

// Python's recursion limit, for what recurses through nested values (repr, ==, <, tojson, reading the
// render context): past it, Python's RecursionError, where deeper nesting would exhaust the stack.
class RecursionGuard {
 public:
  explicit RecursionGuard(const char* where);  // Python's words: "in comparison"
  ~RecursionGuard();
  RecursionGuard(const RecursionGuard&) = delete;
  RecursionGuard& operator=(const RecursionGuard&) = delete;
};

// Python semantics.
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// a < b, a <= b... as Python orders them; Failure for types Python cannot order.
enum class Order : uint8_t { Lt, Le, Gt, Ge };
bool ordered(const Value& a, const Value& b, Order op);
// -1, 0, 1 as Python's sorted() orders a and b (Failure where it cannot).
int three_way(const Value& a, const Value& b);

// str(v) and repr(v).
void append_str(std::string& out, const Value& v);
std::string to_str(const Value& v);
void append_repr(std::string& out, const Value& v);
void append_float_repr(std::string& out, double d);

// Python's type name ('str', 'NoneType', 'dict'...), for error messages.
const char* type_name(const Value& v);
const char* kind_name(Kind k);
// What jinja2 says when an undefined value is used.
std::string undefined_message(const Value& v);
[[noreturn]] void fail_undefined(const Value& v);
[[noreturn]] void raise_failure(const std::string& message);

// A string or sequence a template builds holds at most kMaxBuilt bytes or items (16M, far past any chat
// template; the rendered text too): past it, Python's MemoryError, instead of an allocation that takes the
// machine's memory. `what` names it in the error.
constexpr uint64_t kMaxBuilt = uint64_t{1} << 24;
void check_built_size(uint64_t size, const char* what);

// The work one render may do, counted in loop iterations and in the items (or 16-byte pieces of a string)
// that sequence repetition, concatenation and range() build: 4M, where a chat template takes thousands, and a
// few seconds at most. Past it, a TemplateError instead of a render without end (nested loops over
// range(100000)). The Evaluator starts each render's count (per thread).
constexpr uint64_t kMaxWork = uint64_t{1} << 22;
void start_work();
void charge_work(uint64_t units);
// A string or sequence built by joining others: checked against kMaxBuilt, and its size charged as work
// (a template growing one in a loop copies it every time).
void charge_built(uint64_t size, bool string, const char* what);

}  // namespace pt::jinja
