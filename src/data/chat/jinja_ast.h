// The parsed template: expression and statement nodes, each with the byte offset it starts at (errors turn
// it into line and column). Names are resolved to symbol ids and builtins to ids when parsing, so
// rendering neither hashes nor compares names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/chat/jinja_builtins.h"
#include "data/chat/jinja_value.h"

namespace pt::jinja {

enum class ExprKind : uint8_t {
  Const,
  Name,
  GetAttr,
  GetItem,
  Slice,
  Neg,
  Pos,
  Not,
  Binary,
  And,
  Or,
  Concat,
  Compare,
  Cond,
  Call,
  Filter,
  Test,
  List,
  Tuple,
  Dict,
};

struct Expr {
  Expr(ExprKind k, uint32_t p) : kind(k), pos(p) {}
  virtual ~Expr() = default;
  ExprKind kind;
  uint32_t pos;  // byte offset in the (newline-normalised) source
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr final : Expr {
  ConstExpr(uint32_t p, Value v) : Expr(ExprKind::Const, p), value(std::move(v)) {}
  Value value;
};

struct NameExpr final : Expr {
  NameExpr(uint32_t p, int s, std::string n, GlobalId g)
      : Expr(ExprKind::Name, p), sym(s), name(std::move(n)), global(g) {}
  int sym;
  std::string name;
  GlobalId global;  // the builtin this name falls back to when no variable has it
};

struct GetAttrExpr final : Expr {
  GetAttrExpr(uint32_t p, ExprPtr o, std::string n)
      : Expr(ExprKind::GetAttr, p), object(std::move(o)), name(std::move(n)), method(find_method(name)) {}
  ExprPtr object;
  std::string name;
  MethodId method;
};

struct GetItemExpr final : Expr {
  GetItemExpr(uint32_t p, ExprPtr o, ExprPtr k)
      : Expr(ExprKind::GetItem, p), object(std::move(o)), key(std::move(k)) {}
  ExprPtr object, key;
};

// object[start:stop:step]; absent parts are null.
struct SliceExpr final : Expr {
  explicit SliceExpr(uint32_t p) : Expr(ExprKind::Slice, p) {}
  ExprPtr object, start, stop, step;
  // jinja2 folds a constant {{ }} when compiling, slicing through its forgiving getitem: a slice there of
  // something Python cannot slice is undefined instead of an error.
  bool forgiving = false;
};

struct UnaryExpr final : Expr {
  UnaryExpr(ExprKind k, uint32_t p, ExprPtr o) : Expr(k, p), operand(std::move(o)) {}
  ExprPtr operand;
};

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };

struct BinaryExpr final : Expr {
  BinaryExpr(ExprKind k, uint32_t p, BinaryOp o, ExprPtr l, ExprPtr r)
      : Expr(k, p), op(o), left(std::move(l)), right(std::move(r)) {}
  BinaryOp op;  // for Binary only; And/Or use left and right
  ExprPtr left, right;
};

struct ListExpr final : Expr {  // Concat, List and Tuple: a list of operands
  ListExpr(ExprKind k, uint32_t p) : Expr(k, p) {}
  std::vector<ExprPtr> items;
};

enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct CompareExpr final : Expr {
  CompareExpr(uint32_t p, ExprPtr f) : Expr(ExprKind::Compare, p), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct CondExpr final : Expr {
  explicit CondExpr(uint32_t p) : Expr(ExprKind::Cond, p) {}
  ExprPtr test, then, otherwise;  // otherwise may be null
};

struct Args {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  ExprPtr star, starstar;  // *args and **kwargs
};

struct CallExpr final : Expr {
  CallExpr(uint32_t p, ExprPtr c) : Expr(ExprKind::Call, p), callee(std::move(c)) {}
  ExprPtr callee;
  Args args;
};

// A filter or a test applied to `operand` (null inside a filter block: the block's output).
struct FilterExpr final : Expr {
  FilterExpr(ExprKind k, uint32_t p) : Expr(k, p) {}
  ExprPtr operand;
  std::string name;
  FilterId filter = FilterId::Unknown;
  TestId test = TestId::Unknown;
  Args args;
};

struct DictExpr final : Expr {
  explicit DictExpr(uint32_t p) : Expr(ExprKind::Dict, p) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// --- statements ---

enum class StmtKind : uint8_t {
  Text,
  Print,
  If,
  For,
  Set,
  SetBlock,
  Macro,
  CallBlock,
  FilterBlock,
  With,
  Break,
  Continue,
  Generation,
};

struct Stmt {
  Stmt(StmtKind k, uint32_t p) : kind(k), pos(p) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  uint32_t pos;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt final : Stmt {
  TextStmt(uint32_t p, std::string t) : Stmt(StmtKind::Text, p), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt final : Stmt {
  PrintStmt(uint32_t p, ExprPtr e) : Stmt(StmtKind::Print, p), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt final : Stmt {
  explicit IfStmt(uint32_t p) : Stmt(StmtKind::If, p) {}
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
};

// Where an assignment stores: a name, a namespace attribute (ns.attr) or a tuple of targets.
struct Target {
  enum class Type : uint8_t { Name, NamespaceAttr, Tuple } type = Type::Name;
  uint32_t pos = 0;
  int sym = -1;
  std::string name;  // the variable (or namespace variable)
  std::string attr;  // NamespaceAttr: the attribute
  std::vector<Target> items;
};

struct ForStmt final : Stmt {
  explicit ForStmt(uint32_t p) : Stmt(StmtKind::For, p) {}
  Target target;
  ExprPtr iter, filter;  // filter: `for x in y if cond`, may be null
  Body body, otherwise;
  int loop_sym = -1;  // symbol of `loop`
};

struct SetStmt final : Stmt {
  explicit SetStmt(uint32_t p) : Stmt(StmtKind::Set, p) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt final : Stmt {
  explicit SetBlockStmt(uint32_t p) : Stmt(StmtKind::SetBlock, p) {}
  Target target;
  ExprPtr filter;  // a filter chain over the body's output, may be null
  Body body;
};

struct Param {
  int sym;
  std::string name;
  ExprPtr default_value;  // may be null
};

struct MacroStmt final : Stmt {
  explicit MacroStmt(uint32_t p) : Stmt(StmtKind::Macro, p) {}
  std::string name;
  int sym = -1;
  std::vector<Param> params;
  Body body;
  // Whether the body reads `caller`, `varargs` or `kwargs`: jinja2 accepts the matching arguments only then.
  bool catch_caller = false, catch_varargs = false, catch_kwargs = false;
  int caller_sym = -1, varargs_sym = -1, kwargs_sym = -1;
};

// {% call(params) macro(args) %}body{% endcall %}: `caller` is a macro made of the body.
struct CallBlockStmt final : Stmt {
  explicit CallBlockStmt(uint32_t p) : Stmt(StmtKind::CallBlock, p) {}
  std::unique_ptr<MacroStmt> caller;
  ExprPtr call;  // a CallExpr
};

struct FilterBlockStmt final : Stmt {
  explicit FilterBlockStmt(uint32_t p) : Stmt(StmtKind::FilterBlock, p) {}
  ExprPtr filter;
  Body body;
};

struct WithStmt final : Stmt {
  explicit WithStmt(uint32_t p) : Stmt(StmtKind::With, p) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

// HF's {% generation %}: a call block whose output range is recorded.
struct GenerationStmt final : Stmt {
  explicit GenerationStmt(uint32_t p) : Stmt(StmtKind::Generation, p) {}
  Body body;
};

struct Program {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  Body body;
  std::vector<std::string> symbols;                                        // symbol id -> name
  std::unordered_map<std::string, int, Hash, std::equal_to<>> symbol_ids;  // name -> symbol id
  int symbol(std::string_view name) const;                                 // -1 when no node uses the name
};

}  // namespace pt::jinja
