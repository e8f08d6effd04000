// What jinja2's compiler decides after parsing that changes whether a template compiles or what it renders:
// every filter and test it names must exist (except inside {% if %} and conditional expressions, where a
// missing one fails only when evaluated), and a constant {{ }} is evaluated when compiling, where slices of
// what Python cannot slice give undefined instead of an error.
#pragma once

#include <string>
#include <string_view>

#include "data/chat/jinja_ast.h"

namespace pt::jinja {

// TemplateError (origin, line, column) for the first filter or test that does not exist outside a
// conditional; marks the slices of constant {{ }} expressions forgiving.
void apply_compile_rules(Program& program, std::string_view source, const std::string& origin);

}  // namespace pt::jinja
