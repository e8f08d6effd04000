// Each subcommand lives in its own file and registers itself on the app; main.cpp only dispatches.
#pragma once

#include <CLI/CLI.hpp>

namespace pt::cli {

void register_info(CLI::App& app);
void register_tokenizer(CLI::App& app);
void register_prepare(CLI::App& app);
void register_pack_report(CLI::App& app);
void register_train(CLI::App& app);
void register_eval(CLI::App& app);
void register_generate(CLI::App& app);

}  // namespace pt::cli
