#pragma once
// GrammarCache: compiled grammars for one vocabulary, keyed by the grammar's text, least
// recently used out first. Servers see the same schema again and again; compiling it once saves
// the vocabulary walks. Thread-safe; compilation runs outside the lock, so two threads asking
// for the same new key at once may both compile it (the first to finish is kept).

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/result.h"
#include "grammar/matcher.h"

namespace inferscale::grammar {

class GrammarCache {
  public:
    GrammarCache(std::shared_ptr<const Vocabulary> vocab, std::size_t capacity = 64);

    // Errors: those of Grammar::from_gbnf / from_json_schema (nothing is cached then).
    Result<std::shared_ptr<const CompiledGrammar>> gbnf(std::string_view text);
    Result<std::shared_ptr<const CompiledGrammar>> json_schema(const nlohmann::json& schema);
    // Keeps the schema's property order (Grammar::from_json_schema).
    Result<std::shared_ptr<const CompiledGrammar>> json_schema(
        const nlohmann::ordered_json& schema);
    // Compiled once per cache, kept outside the LRU.
    std::shared_ptr<const CompiledGrammar> json_object();

    std::size_t size() const;
    const Vocabulary& vocabulary() const { return *vocab_; }

  private:
    std::shared_ptr<const CompiledGrammar> find(const std::string& key);
    std::shared_ptr<const CompiledGrammar> insert(const std::string& key,
                                                  std::shared_ptr<const CompiledGrammar> value);

    std::shared_ptr<const Vocabulary> vocab_;
    std::size_t capacity_;
    mutable std::mutex mutex_;
    std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;  // newest first
    std::unordered_map<std::string, decltype(lru_)::iterator> index_;
    std::shared_ptr<const CompiledGrammar> json_object_;
};

}  // namespace inferscale::grammar
