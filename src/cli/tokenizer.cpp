#include "cli/commands.h"
namespace pt::cli { void register_tokenizer(CLI::App&) {} }
