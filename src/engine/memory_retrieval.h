#pragma once
// From a user's stored memory to the facts a request injects: retrieve the top-k facts for the
// question, read their text, and (for context-window encoding) tokenize the w turns before each
// fact's source turn, dropping the oldest context tokens when context + fact would not fit.
// Only `user`'s facts and turns are ever read.

#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/local_model.h"
#include "engine/memory_runtime.h"
#include "engine/request.h"
#include "memory/memory_store.h"
#include "retrieval/fact_retriever.h"

namespace inferscale::engine {

// `facts` (all of `user`'s) as MemoryFacts with their context tokens for a window of
// `context_window` turns, in the given order. An Error when the store fails or a fact is
// someone else's.
Result<std::vector<MemoryFact>> memory_facts(const LocalModel& lm, memory::MemoryStore& store,
                                             std::string_view user,
                                             std::span<const memory::Fact> facts,
                                             int context_window);

// Best-ranked first, as the retriever returns them. An Error when the store fails or a hit's
// fact is gone or belongs to someone else (a retriever bug, never served).
Result<std::vector<MemoryFact>> retrieve_memory_facts(const LocalModel& lm,
                                                      memory::MemoryStore& store,
                                                      const retrieval::FactRetriever& retriever,
                                                      std::string_view user,
                                                      std::string_view question,
                                                      const RetrievalOptions& options);

}  // namespace inferscale::engine
