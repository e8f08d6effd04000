#include "cli/commands.h"
namespace pt::cli { void register_prepare(CLI::App&) {} }
