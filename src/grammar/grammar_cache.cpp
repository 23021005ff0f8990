// GrammarCache: an LRU list with a hash index, under one mutex; compiling runs unlocked.

#include "grammar/grammar_cache.h"

#include <nlohmann/json.hpp>

namespace inferscale::grammar {

GrammarCache::GrammarCache(std::shared_ptr<const Vocabulary> vocab, std::size_t capacity)
    : vocab_(std::move(vocab)), capacity_(capacity == 0 ? 1 : capacity) {}

std::shared_ptr<const CompiledGrammar> GrammarCache::find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
}

std::shared_ptr<const CompiledGrammar> GrammarCache::insert(
    const std::string& key, std::shared_ptr<const CompiledGrammar> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {  // another thread compiled it meanwhile
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
    }
    lru_.emplace_front(key, std::move(value));
    index_.emplace(key, lru_.begin());
    while (lru_.size() > capacity_) {
        index_.erase(lru_.back().first);
        lru_.pop_back();
    }
    return lru_.front().second;
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::gbnf(std::string_view text) {
    std::string key = "gbnf\n" + std::string(text);
    if (auto hit = find(key)) return hit;
    auto grammar = IS_TRY(Grammar::from_gbnf(text));
    return insert(key, CompiledGrammar::compile(std::move(grammar), vocab_));
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::json_schema(
    const nlohmann::json& schema) {
    std::string key = "schema\n" + schema.dump();
    if (auto hit = find(key)) return hit;
    auto grammar = IS_TRY(Grammar::from_json_schema(schema));
    return insert(key, CompiledGrammar::compile(std::move(grammar), vocab_));
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::json_schema(
    const nlohmann::ordered_json& schema) {
    std::string key = "ordered-schema\n" + schema.dump();
    if (auto hit = find(key)) return hit;
    auto grammar = IS_TRY(Grammar::from_json_schema(schema));
    return insert(key, CompiledGrammar::compile(std::move(grammar), vocab_));
}

std::shared_ptr<const CompiledGrammar> GrammarCache::json_object() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (json_object_) return json_object_;
    }
    auto compiled = CompiledGrammar::compile(Grammar::any_json_object(), vocab_);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!json_object_) json_object_ = std::move(compiled);
    return json_object_;
}

std::size_t GrammarCache::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lru_.size();
}

}  // namespace inferscale::grammar
