// Builds the AST from the lexer's tokens, following jinja2's grammar (operator precedence, tests without
// parentheses, tuples without them, the loopcontrols and generation tags).
#pragma once

#include <string>

#include "data/chat/jinja_ast.h"
#include "data/chat/jinja_lexer.h"

namespace pt::jinja {

// Errors name `origin`, line and column and say what was expected. Like jinja2, a filter or test that does
// not exist is an error here unless it sits inside an {% if %} or a conditional expression (then it fails
// only when evaluated).
Program parse_program(const Lexed& lexed, const std::string& origin);

}  // namespace pt::jinja
