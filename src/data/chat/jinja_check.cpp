#include "data/chat/jinja_check.h"

#include "data/chat/jinja_error.h"

namespace pt::jinja {

namespace {

// Whether jinja2 can evaluate `e` when compiling (its as_const): literals and operators on them, lookups
// and slices, tests and the filters that need no context; never names or calls.
bool is_constant(const Expr* e) {
  if (!e) return true;
  switch (e->kind) {
    case ExprKind::Const:
      return true;
    case ExprKind::GetAttr:
      return is_constant(static_cast<const GetAttrExpr*>(e)->object.get());
    case ExprKind::GetItem: {
      const auto* n = static_cast<const GetItemExpr*>(e);
      return is_constant(n->object.get()) && is_constant(n->key.get());
    }
    case ExprKind::Slice: {
      const auto* n = static_cast<const SliceExpr*>(e);
      return is_constant(n->object.get()) && is_constant(n->start.get()) && is_constant(n->stop.get()) &&
             is_constant(n->step.get());
    }
    case ExprKind::Neg:
    case ExprKind::Pos:
    case ExprKind::Not:
      return is_constant(static_cast<const UnaryExpr*>(e)->operand.get());
    case ExprKind::Binary:
    case ExprKind::And:
    case ExprKind::Or: {
      const auto* n = static_cast<const BinaryExpr*>(e);
      return is_constant(n->left.get()) && is_constant(n->right.get());
    }
    case ExprKind::Concat:
    case ExprKind::List:
    case ExprKind::Tuple:
      for (const auto& x : static_cast<const ListExpr*>(e)->items)
        if (!is_constant(x.get())) return false;
      return true;
    case ExprKind::Compare: {
      const auto* n = static_cast<const CompareExpr*>(e);
      for (const auto& r : n->rest)
        if (!is_constant(r.second.get())) return false;
      return is_constant(n->first.get());
    }
    case ExprKind::Cond: {
      const auto* n = static_cast<const CondExpr*>(e);
      return is_constant(n->test.get()) && is_constant(n->then.get()) && n->otherwise &&
             is_constant(n->otherwise.get());
    }
    case ExprKind::Filter:
    case ExprKind::Test: {
      const auto* n = static_cast<const FilterExpr*>(e);
      if (e->kind == ExprKind::Filter) {
        switch (n->filter) {
          case FilterId::Unknown:
          case FilterId::Map:
          case FilterId::Select:
          case FilterId::Reject:
          case FilterId::Selectattr:
          case FilterId::Rejectattr:
          case FilterId::Random:
            return false;  // they take jinja2's context
          default:
            break;
        }
      } else if (n->test == TestId::Unknown) {
        return false;
      }
      if (!n->operand || n->args.star || n->args.starstar) return false;
      for (const auto& a : n->args.positional)
        if (!is_constant(a.get())) return false;
      for (const auto& kw : n->args.keywords)
        if (!is_constant(kw.second.get())) return false;
      return is_constant(n->operand.get());
    }
    case ExprKind::Dict:
      for (const auto& [k, v] : static_cast<const DictExpr*>(e)->items)
        if (!is_constant(k.get()) || !is_constant(v.get())) return false;
      return true;
    default:
      return false;
  }
}

// Marks the slices of a constant expression (all of its nodes are constant, so only the chain through
// objects, operands and arguments needs visiting).
void mark_forgiving_slices(Expr* e) {
  if (!e) return;
  switch (e->kind) {
    case ExprKind::Slice: {
      auto* n = static_cast<SliceExpr*>(e);
      n->forgiving = true;
      for (Expr* x : {n->object.get(), n->start.get(), n->stop.get(), n->step.get()})
        mark_forgiving_slices(x);
      break;
    }
    case ExprKind::GetAttr:
      mark_forgiving_slices(static_cast<GetAttrExpr*>(e)->object.get());
      break;
    case ExprKind::GetItem:
      mark_forgiving_slices(static_cast<GetItemExpr*>(e)->object.get());
      mark_forgiving_slices(static_cast<GetItemExpr*>(e)->key.get());
      break;
    case ExprKind::Neg:
    case ExprKind::Pos:
    case ExprKind::Not:
      mark_forgiving_slices(static_cast<UnaryExpr*>(e)->operand.get());
      break;
    case ExprKind::Binary:
    case ExprKind::And:
    case ExprKind::Or:
      mark_forgiving_slices(static_cast<BinaryExpr*>(e)->left.get());
      mark_forgiving_slices(static_cast<BinaryExpr*>(e)->right.get());
      break;
    case ExprKind::Concat:
    case ExprKind::List:
    case ExprKind::Tuple:
      for (auto& x : static_cast<ListExpr*>(e)->items) mark_forgiving_slices(x.get());
      break;
    case ExprKind::Compare:
      mark_forgiving_slices(static_cast<CompareExpr*>(e)->first.get());
      for (auto& r : static_cast<CompareExpr*>(e)->rest) mark_forgiving_slices(r.second.get());
      break;
    case ExprKind::Cond: {
      auto* n = static_cast<CondExpr*>(e);
      for (Expr* x : {n->test.get(), n->then.get(), n->otherwise.get()}) mark_forgiving_slices(x);
      break;
    }
    case ExprKind::Filter:
    case ExprKind::Test: {
      auto* n = static_cast<FilterExpr*>(e);
      mark_forgiving_slices(n->operand.get());
      for (auto& a : n->args.positional) mark_forgiving_slices(a.get());
      for (auto& kw : n->args.keywords) mark_forgiving_slices(kw.second.get());
      break;
    }
    case ExprKind::Dict:
      for (auto& [k, v] : static_cast<DictExpr*>(e)->items) {
        mark_forgiving_slices(k.get());
        mark_forgiving_slices(v.get());
      }
      break;
    default:
      break;
  }
}

// Walks the AST as jinja2's compiler does: {% if %} and conditional expressions make a "soft" frame where
// unknown filters and tests are allowed; loops, macros and blocks start a hard one again.
class CompileRules {
 public:
  CompileRules(std::string_view source, const std::string& origin) : source_(source), origin_(origin) {}

  void body(const Body& b, bool soft) {
    for (const auto& s : b) stmt(*s, soft);
  }

 private:
  void stmt(const Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::Print: {
        Expr* e = static_cast<const PrintStmt&>(s).expr.get();
        expr(e, soft);
        // jinja2 evaluates a constant {{ }} when compiling.
        if (is_constant(e)) mark_forgiving_slices(e);
        break;
      }
      case StmtKind::If: {
        const auto& n = static_cast<const IfStmt&>(s);
        for (const auto& [test, b] : n.branches) {
          expr(test.get(), true);
          body(b, true);
        }
        body(n.otherwise, true);
        break;
      }
      case StmtKind::For: {
        const auto& n = static_cast<const ForStmt&>(s);
        expr(n.iter.get(), soft);
        expr(n.filter.get(), false);
        body(n.body, false);
        body(n.otherwise, soft);
        break;
      }
      case StmtKind::Set:
        expr(static_cast<const SetStmt&>(s).value.get(), soft);
        break;
      case StmtKind::SetBlock: {
        const auto& n = static_cast<const SetBlockStmt&>(s);
        expr(n.filter.get(), false);
        body(n.body, false);
        break;
      }
      case StmtKind::Macro:
        macro(static_cast<const MacroStmt&>(s));
        break;
      case StmtKind::CallBlock: {
        const auto& n = static_cast<const CallBlockStmt&>(s);
        expr(n.call.get(), soft);
        macro(*n.caller);
        break;
      }
      case StmtKind::FilterBlock: {
        const auto& n = static_cast<const FilterBlockStmt&>(s);
        expr(n.filter.get(), false);
        body(n.body, false);
        break;
      }
      case StmtKind::With: {
        const auto& n = static_cast<const WithStmt&>(s);
        for (const auto& a : n.assignments) expr(a.second.get(), soft);
        body(n.body, false);
        break;
      }
      case StmtKind::Generation:
        body(static_cast<const GenerationStmt&>(s).body, false);
        break;
      default:
        break;
    }
  }

  void macro(const MacroStmt& m) {
    for (const auto& p : m.params) expr(p.default_value.get(), false);
    body(m.body, false);
  }

  void args(const Args& a, bool soft) {
    for (const auto& e : a.positional) expr(e.get(), soft);
    for (const auto& kw : a.keywords) expr(kw.second.get(), soft);
    expr(a.star.get(), soft);
    expr(a.starstar.get(), soft);
  }

  void expr(const Expr* e, bool soft) {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::GetAttr:
        expr(static_cast<const GetAttrExpr*>(e)->object.get(), soft);
        break;
      case ExprKind::GetItem: {
        const auto* n = static_cast<const GetItemExpr*>(e);
        expr(n->object.get(), soft);
        expr(n->key.get(), soft);
        break;
      }
      case ExprKind::Slice: {
        const auto* n = static_cast<const SliceExpr*>(e);
        for (const Expr* x : {n->object.get(), n->start.get(), n->stop.get(), n->step.get()}) expr(x, soft);
        break;
      }
      case ExprKind::Neg:
      case ExprKind::Pos:
      case ExprKind::Not:
        expr(static_cast<const UnaryExpr*>(e)->operand.get(), soft);
        break;
      case ExprKind::Binary:
      case ExprKind::And:
      case ExprKind::Or: {
        const auto* n = static_cast<const BinaryExpr*>(e);
        expr(n->left.get(), soft);
        expr(n->right.get(), soft);
        break;
      }
      case ExprKind::Concat:
      case ExprKind::List:
      case ExprKind::Tuple:
        for (const auto& x : static_cast<const ListExpr*>(e)->items) expr(x.get(), soft);
        break;
      case ExprKind::Compare: {
        const auto* n = static_cast<const CompareExpr*>(e);
        expr(n->first.get(), soft);
        for (const auto& r : n->rest) expr(r.second.get(), soft);
        break;
      }
      case ExprKind::Cond: {
        const auto* n = static_cast<const CondExpr*>(e);
        for (const Expr* x : {n->test.get(), n->then.get(), n->otherwise.get()}) expr(x, true);
        break;
      }
      case ExprKind::Call: {
        const auto* n = static_cast<const CallExpr*>(e);
        expr(n->callee.get(), soft);
        args(n->args, soft);
        break;
      }
      case ExprKind::Filter:
      case ExprKind::Test: {
        const auto* n = static_cast<const FilterExpr*>(e);
        bool unknown =
            e->kind == ExprKind::Filter ? n->filter == FilterId::Unknown : n->test == TestId::Unknown;
        if (unknown && !soft) {
          auto [line, column] = line_column(source_, e->pos);
          throw TemplateError(origin_, line, column,
                              std::string("no ") + (e->kind == ExprKind::Filter ? "filter" : "test") +
                                  " named '" + n->name + "'",
                              false);
        }
        expr(n->operand.get(), soft);
        args(n->args, soft);
        break;
      }
      case ExprKind::Dict:
        for (const auto& [k, v] : static_cast<const DictExpr*>(e)->items) {
          expr(k.get(), soft);
          expr(v.get(), soft);
        }
        break;
      default:
        break;
    }
  }

  std::string_view source_;
  const std::string& origin_;
};

}  // namespace

void apply_compile_rules(Program& program, std::string_view source, const std::string& origin) {
  CompileRules(source, origin).body(program.body, false);
}

}  // namespace pt::jinja
