#include "cli/commands.h"
#include "core/error.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write then fails with EFBIG, which the writers report with the file
  // and the bytes, instead of the signal killing the process mid-save.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "packtrain: padding-free, 2:4-sparse training of decoder LLMs (Llama, Mistral, Qwen2/3, GPT-2)"};
  app.require_subcommand(1);
  pt::cli::register_info(app);
  pt::cli::register_tokenizer(app);
  pt::cli::register_prepare(app);
  pt::cli::register_pack_report(app);
  pt::cli::register_train(app);
  pt::cli::register_eval(app);
  pt::cli::register_generate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const pt::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
