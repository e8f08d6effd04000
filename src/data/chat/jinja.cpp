#include "data/chat/jinja.h"

#include "data/chat/jinja_eval.h"
#include "data/chat/jinja_json.h"
#include "data/chat/jinja_lexer.h"
#include "data/chat/jinja_parser.h"

namespace pt::jinja {

Template Template::parse(std::string_view source, std::string origin) {
  Template t;
  t.origin_ = std::move(origin);
  Lexed lexed = tokenize(source, t.origin_);
  t.program_ = std::make_shared<const Program>(parse_program(lexed, t.origin_));
  t.source_ = std::move(lexed.source);
  return t;
}

template <class Json>
Rendered Template::render_json(const Json& context, const RenderOptions& options) const {
  if (!context.is_object()) throw Error(origin_ + ": the render context must be a JSON object");
  Evaluator ev(*program_, source_, origin_, options.now.value_or(std::chrono::system_clock::now()));
  Frame* root = ev.frames().acquire(nullptr);
  Rendered r;
  try {
    // Only names the template uses can be read: convert just those.
    for (auto it = context.begin(); it != context.end(); ++it) {
      int sym = program_->symbol(it.key());
      if (sym >= 0) root->set(sym, from_json(it.value()));
    }
  } catch (const Failure& f) {
    throw Error(origin_ + ": " + f.what());
  }
  ev.render(root, r.text, r.generation);
  return r;
}

Rendered Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  return render_json(context, options);
}

Rendered Template::render(const nlohmann::json& context, const RenderOptions& options) const {
  return render_json(context, options);
}

}  // namespace pt::jinja
