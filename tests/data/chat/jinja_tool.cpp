// packtrain_jinja_tool: renders chat templates for the oracle test (tests/data/chat/template_oracle.py).
// Reads JSON lines {"template", "context", "now"?} on stdin and writes one JSON line per input:
// {"text", "generation": [[begin, end], ...], "error": null} or {"text": null, "error": "..."}.
// "now" (seconds since the epoch) fixes strftime_now(); the output is flushed after every line so the
// caller can stream.
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "data/chat/jinja.h"

int main() {
  std::ios::sync_with_stdio(false);
  // Templates repeat across lines: parse each once, as prepare does.
  std::map<std::string, std::shared_ptr<pt::jinja::Template>> parsed;
  std::map<std::string, std::string> parse_errors;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::ordered_json out;
    try {
      auto in = nlohmann::ordered_json::parse(line);
      std::string source = in.at("template").get<std::string>();
      pt::jinja::RenderOptions options;
      if (in.contains("now"))
        options.now = std::chrono::system_clock::time_point(
            std::chrono::microseconds(static_cast<long long>(in["now"].get<double>() * 1e6)));
      if (!parsed.count(source) && !parse_errors.count(source)) {
        try {
          parsed[source] =
              std::make_shared<pt::jinja::Template>(pt::jinja::Template::parse(source, "template"));
        } catch (const pt::Error& e) {
          parse_errors[source] = e.what();
        }
      }
      if (parse_errors.count(source)) throw pt::Error(parse_errors[source]);
      pt::jinja::Rendered r = parsed[source]->render(in.at("context"), options);
      out["text"] = r.text;
      out["generation"] = nlohmann::ordered_json::array();
      for (auto [b, e] : r.generation) out["generation"].push_back({b, e});
      out["error"] = nullptr;
    } catch (const std::exception& e) {
      out = nlohmann::ordered_json{{"text", nullptr}, {"generation", nullptr}, {"error", e.what()}};
    }
    // ASCII only: a reader splitting lines at U+2028 must still see one answer per line.
    std::cout << out.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) << '\n' << std::flush;
  }
  return 0;
}
