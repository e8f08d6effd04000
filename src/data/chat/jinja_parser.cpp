#include "data/chat/jinja_parser.h"

#include <initializer_list>
#include <string_view>

#include "data/chat/jinja_check.h"
#include "data/chat/jinja_error.h"

namespace pt::jinja {

int Program::symbol(std::string_view name) const {
  auto it = symbol_ids.find(name);
  return it == symbol_ids.end() ? -1 : it->second;
}

namespace {

using Names = std::initializer_list<std::string_view>;

constexpr int kMaxDepth = 200;  // nesting of expressions and blocks; deeper templates would exhaust the stack

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Data:
      return "template text";
    case Tok::VarBegin:
      return "'{{'";
    case Tok::VarEnd:
      return "end of print statement '}}'";
    case Tok::BlockBegin:
      return "'{%'";
    case Tok::BlockEnd:
      return "end of statement block '%}'";
    case Tok::Name:
      return "'" + t.text + "'";
    case Tok::String:
      return "string";
    case Tok::Integer:
      return "integer";
    case Tok::Float:
      return "float";
    case Tok::Op:
      return "'" + t.text + "'";
    default:
      return "end of template";
  }
}

std::string quoted_list(Names names) {
  std::string s;
  for (auto n : names) {
    if (!s.empty()) s += " or ";
    s += "'" + std::string(n) + "'";
  }
  return s;
}

class Parser {
 public:
  Parser(const Lexed& lexed, const std::string& origin)
      : toks_(lexed.tokens), source_(lexed.source), origin_(origin) {}

  Program run() {
    program_.body = subparse({});
    return std::move(program_);
  }

 private:
  // --- token stream ---
  const Token& cur() const { return toks_[i_]; }
  const Token& peek() const { return toks_[i_ + 1 < toks_.size() ? i_ + 1 : i_]; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool is_op(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  [[noreturn]] void error(uint32_t pos, std::string message) {
    throw_at(origin_, source_, pos, std::move(message));
  }
  [[noreturn]] void unexpected(std::string expected) {
    if (cur().type == Tok::Eof) error(cur().pos, "unexpected end of template, expected " + expected);
    error(cur().pos, "expected " + expected + ", got " + describe(cur()));
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type) unexpected(what);
    next();
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) unexpected("'" + std::string(op) + "'");
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) unexpected("a name");
    return next().text;
  }

  struct DepthGuard {
    DepthGuard(Parser& p, uint32_t pos) : parser(p) {
      if (++parser.depth_ > kMaxDepth) parser.error(pos, "template nested too deeply");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // --- symbols ---
  int symbol(const std::string& name) {
    auto [it, inserted] = program_.symbol_ids.try_emplace(name, static_cast<int>(program_.symbols.size()));
    if (inserted) program_.symbols.push_back(name);
    return it->second;
  }

  ExprPtr name_expr(uint32_t pos, const std::string& name) {
    if (name == "caller" || name == "varargs" || name == "kwargs") {
      // jinja2 lets a macro take these arguments only when its body reads them.
      for (MacroStmt* m : macros_) {
        if (name == "caller")
          m->catch_caller = true;
        else if (name == "varargs")
          m->catch_varargs = true;
        else
          m->catch_kwargs = true;
      }
    }
    return std::make_unique<NameExpr>(pos, symbol(name), name, find_global(name));
  }

  // --- statements ---
  struct Open {
    std::string tag;
    uint32_t pos;
  };

  // Statements up to a {% name %} among `ends` (left as the current token), or to the end of the template
  // at top level.
  Body subparse(Names ends) {
    Body body;
    while (cur().type != Tok::Eof) {
      const Token& t = cur();
      if (t.type == Tok::Data) {
        body.push_back(std::make_unique<TextStmt>(t.pos, t.text));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        ExprPtr e = parse_tuple(true, {}, false);
        body.push_back(std::make_unique<PrintStmt>(t.pos, std::move(e)));
        expect(Tok::VarEnd, "end of print statement '}}'");
      } else if (t.type == Tok::BlockBegin) {
        next();
        if (cur().type == Tok::Name)
          for (auto e : ends)
            if (cur().text == e) return body;
        parse_statement(body, ends);
        expect(Tok::BlockEnd, "end of statement block '%}'");
      } else {
        error(t.pos, "unexpected " + describe(t));
      }
    }
    if (ends.size() != 0) {
      std::string msg = "unexpected end of template, expected " + quoted_list(ends);
      if (!open_.empty()) {
        auto [line, column] = line_column(source_, open_.back().pos);
        msg += " to close the '" + open_.back().tag + "' at line " + std::to_string(line) + " column " +
               std::to_string(column);
      }
      error(cur().pos, msg);
    }
    return body;
  }

  // parse_statements of jinja2: an optional colon, the end of the tag, then the body up to one of `ends`;
  // `drop` consumes that end tag's name.
  Body statements(Names ends, bool drop) {
    skip_op(":");
    expect(Tok::BlockEnd, "end of statement block '%}'");
    Body body = subparse(ends);
    if (drop) next();
    return body;
  }

  void parse_statement(Body& into, Names ends) {
    const Token& t = cur();
    if (t.type != Tok::Name) error(t.pos, "expected a tag name, got " + describe(t));
    DepthGuard guard(*this, t.pos);
    const std::string& tag = t.text;
    open_.push_back({tag, t.pos});
    if (tag == "if")
      into.push_back(parse_if());
    else if (tag == "for")
      into.push_back(parse_for());
    else if (tag == "set")
      into.push_back(parse_set());
    else if (tag == "macro")
      into.push_back(parse_macro());
    else if (tag == "call")
      into.push_back(parse_call_block());
    else if (tag == "filter")
      into.push_back(parse_filter_block());
    else if (tag == "with")
      into.push_back(parse_with());
    else if (tag == "generation")
      into.push_back(parse_generation());
    else if (tag == "print")
      parse_print(into);
    else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error(t.pos, "'" + tag + "' outside loop");
      into.push_back(std::make_unique<Stmt>(tag == "break" ? StmtKind::Break : StmtKind::Continue, t.pos));
      next();
    } else if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
               tag == "autoescape") {
      error(t.pos, "'" + tag + "' tags are not supported in chat templates");
    } else {
      std::string msg = "unknown tag '" + tag + "'";
      if (ends.size() != 0) msg += ", expected " + quoted_list(ends);
      error(t.pos, msg);
    }
    open_.pop_back();
  }

  StmtPtr parse_if() {
    auto node = std::make_unique<IfStmt>(next().pos);
    while (true) {
      ExprPtr test = parse_tuple(false, {}, false);
      Body body = statements({"elif", "else", "endif"}, false);
      node->branches.emplace_back(std::move(test), std::move(body));
      const Token& t = next();
      if (t.text == "elif") continue;
      if (t.text == "else") node->otherwise = statements({"endif"}, true);
      break;
    }
    return node;
  }

  StmtPtr parse_for() {
    auto node = std::make_unique<ForStmt>(next().pos);
    node->target = parse_target(true, {"in"}, false);
    if (!skip_name("in")) unexpected("'in'");
    node->iter = parse_tuple(false, {"recursive"}, false);
    if (skip_name("if")) node->filter = parse_expression(true);
    if (is_name("recursive")) error(cur().pos, "recursive loops are not supported");
    node->loop_sym = symbol("loop");
    ++loop_depth_;
    node->body = statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().text == "else") node->otherwise = statements({"endfor"}, true);
    return node;
  }

  StmtPtr parse_set() {
    uint32_t pos = next().pos;
    Target target = parse_target(true, {}, true);
    if (skip_op("=")) {
      auto node = std::make_unique<SetStmt>(pos);
      node->target = std::move(target);
      node->value = parse_tuple(true, {}, false);
      return node;
    }
    auto node = std::make_unique<SetBlockStmt>(pos);
    node->target = std::move(target);
    if (is_op("|")) node->filter = parse_filter(nullptr, false);
    node->body = statements({"endset"}, true);
    return node;
  }

  void parse_signature(MacroStmt& m) {
    expect_op("(");
    bool defaults = false;
    while (!is_op(")")) {
      if (!m.params.empty()) expect_op(",");
      uint32_t pos = cur().pos;
      std::string name = expect_name();
      Param p{symbol(name), name, nullptr};
      if (skip_op("=")) {
        p.default_value = parse_expression(true);
        defaults = true;
      } else if (defaults) {
        error(pos, "non-default argument follows default argument");
      }
      m.params.push_back(std::move(p));
    }
    expect_op(")");
  }

  // A macro's body: its own scope, where break and continue do not reach an outer loop.
  Body macro_body(MacroStmt& m, std::string_view end) {
    m.caller_sym = symbol("caller");
    m.varargs_sym = symbol("varargs");
    m.kwargs_sym = symbol("kwargs");
    macros_.push_back(&m);
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    Body body = statements({end}, true);
    loop_depth_ = saved_loops;
    macros_.pop_back();
    return body;
  }

  StmtPtr parse_macro() {
    auto node = std::make_unique<MacroStmt>(next().pos);
    node->name = expect_name();
    node->sym = symbol(node->name);
    parse_signature(*node);
    node->body = macro_body(*node, "endmacro");
    return node;
  }

  StmtPtr parse_call_block() {
    auto node = std::make_unique<CallBlockStmt>(next().pos);
    node->caller = std::make_unique<MacroStmt>(node->pos);
    node->caller->name = "caller";
    if (is_op("(")) parse_signature(*node->caller);
    uint32_t pos = cur().pos;
    node->call = parse_expression(true);
    if (node->call->kind != ExprKind::Call) error(pos, "expected a macro call after 'call'");
    node->caller->body = macro_body(*node->caller, "endcall");
    return node;
  }

  StmtPtr parse_filter_block() {
    auto node = std::make_unique<FilterBlockStmt>(next().pos);
    node->filter = parse_filter(nullptr, true);
    node->body = statements({"endfilter"}, true);
    return node;
  }

  StmtPtr parse_with() {
    auto node = std::make_unique<WithStmt>(next().pos);
    while (cur().type != Tok::BlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      Target target = parse_target(true, {}, false);
      expect_op("=");
      node->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    node->body = statements({"endwith"}, true);
    return node;
  }

  StmtPtr parse_generation() {
    auto node = std::make_unique<GenerationStmt>(next().pos);
    int saved_loops = loop_depth_;
    loop_depth_ = 0;  // the body is a caller macro in HF's extension
    node->body = statements({"endgeneration"}, true);
    loop_depth_ = saved_loops;
    return node;
  }

  void parse_print(Body& into) {
    next();
    bool first = true;
    while (cur().type != Tok::BlockEnd) {
      if (!first) expect_op(",");
      first = false;
      uint32_t pos = cur().pos;
      into.push_back(std::make_unique<PrintStmt>(pos, parse_expression(true)));
    }
  }

  // --- assignment targets ---
  Target parse_target(bool with_tuple, Names ends, bool with_namespace) {
    uint32_t pos = cur().pos;
    if (!with_tuple) return parse_target_primary(with_namespace);
    std::vector<Target> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(ends)) break;
      items.push_back(parse_target_primary(with_namespace));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (items.empty()) unexpected("an assignment target");
      return std::move(items[0]);
    }
    Target t;
    t.type = Target::Type::Tuple;
    t.pos = pos;
    t.items = std::move(items);
    return t;
  }

  Target parse_target_primary(bool with_namespace) {
    Target t;
    t.pos = cur().pos;
    if (is_op("(")) {
      next();
      t = parse_target(true, {}, with_namespace);
      expect_op(")");
      return t;
    }
    if (cur().type != Tok::Name) error(t.pos, "can't assign to " + describe(cur()));
    t.name = next().text;
    static constexpr std::string_view kConstants[] = {"true", "false", "True", "False", "none", "None"};
    for (auto c : kConstants)
      if (t.name == c) error(t.pos, "can't assign to the constant '" + t.name + "'");
    t.sym = symbol(t.name);
    if (with_namespace && is_op(".")) {
      next();
      t.type = Target::Type::NamespaceAttr;
      t.attr = expect_name();
    }
    return t;
  }

  // --- expressions ---
  bool tuple_end(Names extra) const {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
    if (cur().type == Tok::Name)
      for (auto e : extra)
        if (cur().text == e) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, Names extra, bool explicit_parens) {
    uint32_t pos = cur().pos;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) unexpected("an expression");
    }
    auto t = std::make_unique<ListExpr>(ExprKind::Tuple, pos);
    t->items = std::move(items);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this, cur().pos);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    uint32_t pos = cur().pos;
    ExprPtr e1 = parse_or();
    while (is_name("if")) {
      next();
      auto c = std::make_unique<CondExpr>(pos);
      c->test = parse_or();
      if (skip_name("else")) c->otherwise = parse_condexpr();
      c->then = std::move(e1);
      e1 = std::move(c);
      pos = cur().pos;
    }
    return e1;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      uint32_t pos = next().pos;
      left = std::make_unique<BinaryExpr>(ExprKind::Or, pos, BinaryOp::Add, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      uint32_t pos = next().pos;
      left = std::make_unique<BinaryExpr>(ExprKind::And, pos, BinaryOp::Add, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      uint32_t pos = next().pos;
      DepthGuard guard(*this, pos);
      return std::make_unique<UnaryExpr>(ExprKind::Not, pos, parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    uint32_t pos = cur().pos;
    ExprPtr first = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      CompareOp op;
      if (is_op("=="))
        op = CompareOp::Eq;
      else if (is_op("!="))
        op = CompareOp::Ne;
      else if (is_op("<"))
        op = CompareOp::Lt;
      else if (is_op("<="))
        op = CompareOp::Le;
      else if (is_op(">"))
        op = CompareOp::Gt;
      else if (is_op(">="))
        op = CompareOp::Ge;
      else if (is_name("in"))
        op = CompareOp::In;
      else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        next();
        op = CompareOp::NotIn;
      } else {
        break;
      }
      next();
      if (!cmp) cmp = std::make_unique<CompareExpr>(pos, std::move(first));
      cmp->rest.emplace_back(op, parse_math1());
    }
    if (!cmp) return first;
    return cmp;
  }

  ExprPtr binary(uint32_t pos, BinaryOp op, ExprPtr l, ExprPtr r) {
    return std::make_unique<BinaryExpr>(ExprKind::Binary, pos, op, std::move(l), std::move(r));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      uint32_t pos = cur().pos;
      BinaryOp op = next().text == "+" ? BinaryOp::Add : BinaryOp::Sub;
      left = binary(pos, op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    uint32_t pos = cur().pos;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto c = std::make_unique<ListExpr>(ExprKind::Concat, pos);
    c->items.push_back(std::move(first));
    while (skip_op("~")) c->items.push_back(parse_math2());
    return c;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      uint32_t pos = cur().pos;
      const std::string& t = next().text;
      BinaryOp op = t == "*"    ? BinaryOp::Mul
                    : t == "/"  ? BinaryOp::Div
                    : t == "//" ? BinaryOp::FloorDiv
                                : BinaryOp::Mod;
      left = binary(pos, op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      uint32_t pos = next().pos;
      left = binary(pos, BinaryOp::Pow, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    uint32_t pos = cur().pos;
    DepthGuard guard(*this, pos);
    ExprPtr node;
    if (skip_op("-"))
      node = std::make_unique<UnaryExpr>(ExprKind::Neg, pos, parse_unary(false));
    else if (skip_op("+"))
      node = std::make_unique<UnaryExpr>(ExprKind::Pos, pos, parse_unary(false));
    else
      node = parse_primary();
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case Tok::Name: {
        next();
        if (t.text == "true" || t.text == "True")
          return std::make_unique<ConstExpr>(t.pos, Value::boolean(true));
        if (t.text == "false" || t.text == "False")
          return std::make_unique<ConstExpr>(t.pos, Value::boolean(false));
        if (t.text == "none" || t.text == "None") return std::make_unique<ConstExpr>(t.pos, Value::none());
        return name_expr(t.pos, t.text);
      }
      case Tok::String: {
        std::string s = next().text;
        while (cur().type == Tok::String) s += next().text;  // adjacent literals concatenate
        return std::make_unique<ConstExpr>(t.pos, Value::string(std::move(s)));
      }
      case Tok::Integer:
        next();
        return std::make_unique<ConstExpr>(t.pos, Value::integer(t.integer));
      case Tok::Float:
        next();
        return std::make_unique<ConstExpr>(t.pos, Value::number(t.number));
      case Tok::Op:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    if (t.type == Tok::Eof) error(t.pos, "unexpected end of template, expected an expression");
    error(t.pos, "unexpected " + describe(t) + ", expected an expression");
  }

  ExprPtr parse_list() {
    auto node = std::make_unique<ListExpr>(ExprKind::List, next().pos);
    while (!is_op("]")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("]")) break;
      node->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return node;
  }

  ExprPtr parse_dict() {
    auto node = std::make_unique<DictExpr>(next().pos);
    while (!is_op("}")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      node->items.emplace_back(std::move(key), parse_expression(true));
    }
    expect_op("}");
    return node;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("["))
        node = parse_subscript(std::move(node));
      else if (is_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|"))
        node = parse_filter(std::move(node), false);
      else if (is_name("is"))
        node = parse_test(std::move(node));
      else if (is_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& attr = cur();
      if (attr.type == Tok::Name) {
        next();
        return std::make_unique<GetAttrExpr>(t.pos, std::move(node), attr.text);
      }
      if (attr.type != Tok::Integer) unexpected("a name or number after '.'");
      next();
      return std::make_unique<GetItemExpr>(
          t.pos, std::move(node), std::make_unique<ConstExpr>(attr.pos, Value::integer(attr.integer)));
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) error(t.pos, "expected a subscript expression");
    if (args.size() == 1 && args[0]->kind == ExprKind::Slice) {
      auto* s = static_cast<SliceExpr*>(args[0].get());
      s->object = std::move(node);
      return std::move(args[0]);
    }
    ExprPtr key;
    if (args.size() == 1) {
      key = std::move(args[0]);
    } else {
      auto tuple = std::make_unique<ListExpr>(ExprKind::Tuple, t.pos);
      for (auto& a : args) {
        if (a->kind == ExprKind::Slice) error(a->pos, "slices inside a tuple subscript are not supported");
        tuple->items.push_back(std::move(a));
      }
      key = std::move(tuple);
    }
    return std::make_unique<GetItemExpr>(t.pos, std::move(node), std::move(key));
  }

  // An index, or a slice start:stop:step (returned as a SliceExpr without its object).
  ExprPtr parse_subscribed() {
    uint32_t pos = cur().pos;
    auto slice = std::make_unique<SliceExpr>(pos);
    if (!skip_op(":")) {
      ExprPtr e = parse_expression(true);
      if (!skip_op(":")) return e;
      slice->start = std::move(e);
    }
    if (!is_op(":") && !is_op("]") && !is_op(",")) slice->stop = parse_expression(true);
    if (skip_op(":") && !is_op("]") && !is_op(",")) slice->step = parse_expression(true);
    return slice;
  }

  Args parse_call_args() {
    uint32_t pos = cur().pos;
    expect_op("(");
    Args args;
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) error(pos, "invalid syntax for function call expression");
    };
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (skip_op("*")) {
        ensure(!args.star && !args.starstar);
        args.star = parse_expression(true);
      } else if (skip_op("**")) {
        ensure(!args.starstar);
        args.starstar = parse_expression(true);
      } else if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        ensure(!args.starstar);
        std::string key = next().text;
        next();
        args.keywords.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!args.star && !args.starstar && args.keywords.empty());
        args.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr node) {
    uint32_t pos = node->pos;
    auto call = std::make_unique<CallExpr>(pos, std::move(node));
    call->args = parse_call_args();
    return call;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      auto f = std::make_unique<FilterExpr>(ExprKind::Filter, cur().pos);
      f->name = dotted_name();
      f->filter = find_filter(f->name);
      if (is_op("(")) f->args = parse_call_args();
      f->operand = std::move(node);
      node = std::move(f);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    uint32_t pos = next().pos;
    bool negated = skip_name("not");
    auto t = std::make_unique<FilterExpr>(ExprKind::Test, cur().pos);
    t->name = dotted_name();
    t->test = find_test(t->name);
    if (is_op("(")) {
      t->args = parse_call_args();
    } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Integer ||
                cur().type == Tok::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      // One argument without parentheses: `x is divisibleby 3`.
      if (is_name("is")) error(cur().pos, "tests cannot be chained with 'is'");
      t->args.positional.push_back(parse_postfix(parse_primary()));
    }
    t->operand = std::move(node);
    if (negated) return std::make_unique<UnaryExpr>(ExprKind::Not, pos, std::move(t));
    return t;
  }

  const std::vector<Token>& toks_;
  std::string_view source_;
  const std::string& origin_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<Open> open_;
  std::vector<MacroStmt*> macros_;
  Program program_;
};

}  // namespace

Program parse_program(const Lexed& lexed, const std::string& origin) {
  Program program = Parser(lexed, origin).run();
  apply_compile_rules(program, lexed.source, origin);
  return program;
}

}  // namespace pt::jinja
