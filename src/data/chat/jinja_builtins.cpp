#include "data/chat/jinja_builtins.h"

#include <utility>

namespace pt::jinja {

namespace {

template <class Id, size_t N>
Id lookup(const std::pair<std::string_view, Id> (&table)[N], std::string_view name, Id none) {
  for (const auto& [n, id] : table)
    if (n == name) return id;
  return none;
}

constexpr std::pair<std::string_view, FilterId> kFilters[] = {
    {"abs", FilterId::Abs},
    {"attr", FilterId::Attr},
    {"batch", FilterId::Batch},
    {"capitalize", FilterId::Capitalize},
    {"center", FilterId::Center},
    {"count", FilterId::Count},
    {"d", FilterId::Default},
    {"default", FilterId::Default},
    {"dictsort", FilterId::Dictsort},
    {"e", FilterId::Escape},
    {"escape", FilterId::Escape},
    {"filesizeformat", FilterId::Filesizeformat},
    {"first", FilterId::First},
    {"float", FilterId::Float},
    {"forceescape", FilterId::Forceescape},
    {"format", FilterId::Format},
    {"groupby", FilterId::Groupby},
    {"indent", FilterId::Indent},
    {"int", FilterId::Int},
    {"join", FilterId::Join},
    {"last", FilterId::Last},
    {"length", FilterId::Length},
    {"list", FilterId::List},
    {"lower", FilterId::Lower},
    {"items", FilterId::Items},
    {"map", FilterId::Map},
    {"min", FilterId::Min},
    {"max", FilterId::Max},
    {"pprint", FilterId::Pprint},
    {"random", FilterId::Random},
    {"reject", FilterId::Reject},
    {"rejectattr", FilterId::Rejectattr},
    {"replace", FilterId::Replace},
    {"reverse", FilterId::Reverse},
    {"round", FilterId::Round},
    {"safe", FilterId::Safe},
    {"select", FilterId::Select},
    {"selectattr", FilterId::Selectattr},
    {"slice", FilterId::Slice},
    {"sort", FilterId::Sort},
    {"string", FilterId::String},
    {"striptags", FilterId::Striptags},
    {"sum", FilterId::Sum},
    {"title", FilterId::Title},
    {"tojson", FilterId::Tojson},
    {"trim", FilterId::Trim},
    {"truncate", FilterId::Truncate},
    {"unique", FilterId::Unique},
    {"upper", FilterId::Upper},
    {"urlencode", FilterId::Urlencode},
    {"urlize", FilterId::Urlize},
    {"wordcount", FilterId::Wordcount},
    {"wordwrap", FilterId::Wordwrap},
    {"xmlattr", FilterId::Xmlattr},
};

constexpr std::pair<std::string_view, TestId> kTests[] = {
    {"odd", TestId::Odd},
    {"even", TestId::Even},
    {"divisibleby", TestId::Divisibleby},
    {"defined", TestId::Defined},
    {"undefined", TestId::Undefined},
    {"filter", TestId::Filter},
    {"test", TestId::Test},
    {"none", TestId::None},
    {"boolean", TestId::Boolean},
    {"false", TestId::False},
    {"true", TestId::True},
    {"integer", TestId::Integer},
    {"float", TestId::Float},
    {"lower", TestId::Lower},
    {"upper", TestId::Upper},
    {"string", TestId::String},
    {"mapping", TestId::Mapping},
    {"number", TestId::Number},
    {"sequence", TestId::Sequence},
    {"iterable", TestId::Iterable},
    {"callable", TestId::Callable},
    {"sameas", TestId::Sameas},
    {"escaped", TestId::Escaped},
    {"in", TestId::In},
    {"==", TestId::Eq},
    {"eq", TestId::Eq},
    {"equalto", TestId::Eq},
    {"!=", TestId::Ne},
    {"ne", TestId::Ne},
    {">", TestId::Gt},
    {"gt", TestId::Gt},
    {"greaterthan", TestId::Gt},
    {"ge", TestId::Ge},
    {">=", TestId::Ge},
    {"<", TestId::Lt},
    {"lt", TestId::Lt},
    {"lessthan", TestId::Lt},
    {"<=", TestId::Le},
    {"le", TestId::Le},
};

constexpr std::pair<std::string_view, GlobalId> kGlobals[] = {
    {"range", GlobalId::Range},
    {"dict", GlobalId::Dict},
    {"namespace", GlobalId::Namespace},
    {"raise_exception", GlobalId::RaiseException},
    {"strftime_now", GlobalId::StrftimeNow},
    {"joiner", GlobalId::Joiner},
    {"cycler", GlobalId::Cycler},
    {"lipsum", GlobalId::Lipsum},
};

constexpr std::pair<std::string_view, MethodId> kMethods[] = {
    {"capitalize", MethodId::Capitalize},
    {"casefold", MethodId::Casefold},
    {"center", MethodId::Center},
    {"count", MethodId::Count},
    {"encode", MethodId::Encode},
    {"endswith", MethodId::Endswith},
    {"expandtabs", MethodId::Expandtabs},
    {"find", MethodId::Find},
    {"format", MethodId::Format},
    {"format_map", MethodId::FormatMap},
    {"index", MethodId::Index},
    {"isalnum", MethodId::Isalnum},
    {"isalpha", MethodId::Isalpha},
    {"isascii", MethodId::Isascii},
    {"isdecimal", MethodId::Isdecimal},
    {"isdigit", MethodId::Isdigit},
    {"isidentifier", MethodId::Isidentifier},
    {"islower", MethodId::Islower},
    {"isnumeric", MethodId::Isnumeric},
    {"isprintable", MethodId::Isprintable},
    {"isspace", MethodId::Isspace},
    {"istitle", MethodId::Istitle},
    {"isupper", MethodId::Isupper},
    {"join", MethodId::Join},
    {"ljust", MethodId::Ljust},
    {"lower", MethodId::Lower},
    {"lstrip", MethodId::Lstrip},
    {"maketrans", MethodId::Maketrans},
    {"partition", MethodId::Partition},
    {"removeprefix", MethodId::Removeprefix},
    {"removesuffix", MethodId::Removesuffix},
    {"replace", MethodId::Replace},
    {"rfind", MethodId::Rfind},
    {"rindex", MethodId::Rindex},
    {"rjust", MethodId::Rjust},
    {"rpartition", MethodId::Rpartition},
    {"rsplit", MethodId::Rsplit},
    {"rstrip", MethodId::Rstrip},
    {"split", MethodId::Split},
    {"splitlines", MethodId::Splitlines},
    {"startswith", MethodId::Startswith},
    {"strip", MethodId::Strip},
    {"swapcase", MethodId::Swapcase},
    {"title", MethodId::Title},
    {"translate", MethodId::Translate},
    {"upper", MethodId::Upper},
    {"zfill", MethodId::Zfill},
    {"clear", MethodId::Clear},
    {"copy", MethodId::Copy},
    {"fromkeys", MethodId::Fromkeys},
    {"get", MethodId::Get},
    {"items", MethodId::Items},
    {"keys", MethodId::Keys},
    {"pop", MethodId::Pop},
    {"popitem", MethodId::Popitem},
    {"setdefault", MethodId::Setdefault},
    {"update", MethodId::Update},
    {"values", MethodId::Values},
    {"append", MethodId::Append},
    {"extend", MethodId::Extend},
    {"insert", MethodId::Insert},
    {"remove", MethodId::Remove},
    {"reverse", MethodId::Reverse},
    {"sort", MethodId::Sort},
    {"cycle", MethodId::Cycle},
    {"changed", MethodId::Changed},
    {"next", MethodId::Next},
    {"reset", MethodId::Reset},
    {"current", MethodId::Current},
};

bool is_str_method(MethodId id) { return id >= MethodId::Capitalize && id <= MethodId::Zfill; }

}  // namespace

FilterId find_filter(std::string_view name) { return lookup(kFilters, name, FilterId::Unknown); }
TestId find_test(std::string_view name) { return lookup(kTests, name, TestId::Unknown); }
GlobalId find_global(std::string_view name) { return lookup(kGlobals, name, GlobalId::None); }
MethodId find_method(std::string_view name) { return lookup(kMethods, name, MethodId::None); }

const char* method_name(MethodId id) {
  for (const auto& [n, m] : kMethods)
    if (m == id) return n.data();
  return "?";
}

bool has_method(const Value& v, MethodId id) {
  switch (v.kind()) {
    case Kind::String:
      return is_str_method(id);
    case Kind::Dict:
      switch (id) {
        case MethodId::Clear:
        case MethodId::Copy:
        case MethodId::Fromkeys:
        case MethodId::Get:
        case MethodId::Items:
        case MethodId::Keys:
        case MethodId::Pop:
        case MethodId::Popitem:
        case MethodId::Setdefault:
        case MethodId::Update:
        case MethodId::Values:
          return true;
        default:
          return false;
      }
    case Kind::List:
      if (v.flavor() == Flavor::Range) return id == MethodId::Count || id == MethodId::Index;
      if (v.flavor() != Flavor::Plain) return false;
      switch (id) {
        case MethodId::Append:
        case MethodId::Clear:
        case MethodId::Copy:
        case MethodId::Count:
        case MethodId::Extend:
        case MethodId::Index:
        case MethodId::Insert:
        case MethodId::Pop:
        case MethodId::Remove:
        case MethodId::Reverse:
        case MethodId::Sort:
          return true;
        default:
          return false;
      }
    case Kind::Tuple:
      return id == MethodId::Count || id == MethodId::Index;
    case Kind::Loop:
      return id == MethodId::Cycle || id == MethodId::Changed;
    case Kind::Callable: {
      const CallableObj& c = v.callable_obj();
      if (c.kind == CallableKind::Cycler)
        return id == MethodId::Next || id == MethodId::Reset || id == MethodId::Current;
      return c.kind == CallableKind::Global && c.id == static_cast<int>(GlobalId::Dict) &&
             id == MethodId::Fromkeys;
    }
    default:
      return false;
  }
}

bool is_mutating(const Value& v, MethodId id) {
  if (v.kind() == Kind::Dict)
    return id == MethodId::Clear || id == MethodId::Pop || id == MethodId::Popitem ||
           id == MethodId::Setdefault || id == MethodId::Update;
  if (v.kind() == Kind::List && v.flavor() == Flavor::Plain)
    return id == MethodId::Append || id == MethodId::Clear || id == MethodId::Pop ||
           id == MethodId::Reverse || id == MethodId::Insert || id == MethodId::Sort ||
           id == MethodId::Extend || id == MethodId::Remove;
  return false;
}

}  // namespace pt::jinja
