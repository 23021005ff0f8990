#pragma once
// The prompts and JSON schemas of fact extraction, written for small
// instruction models: short rules, one worked example each, and a schema that
// leaves the model no other shape to answer in. Step 1 turns new conversation
// messages into candidate facts (and facts the user asks to forget); step 2
// decides, for one candidate and the stored facts most like it, whether it is
// new (ADD), changes one of them (UPDATE), makes one untrue (DELETE) or adds
// nothing (NONE).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "template/chat_template.h"

namespace inferscale::extract {

// One message of the conversation facts are extracted from.
struct ConversationMessage {
    std::string role;     // "user" or "assistant"
    std::string speaker;  // a name when the conversation has one (LoCoMo), else empty
    std::string content;
};

// Step 1. `date`: when the messages were said (resolves "yesterday"); empty
// when unknown.
std::vector<jinja::ChatMessage> candidate_prompt(const std::vector<ConversationMessage>& messages,
                                                 const std::string& date);
// {"facts": [string...], "forget": [string...]}, at most `max_facts` facts.
nlohmann::json candidate_schema(int max_facts);

// A stored fact as step 2 shows it: numbered by its position in the list, never
// by its id, so the model cannot invent one.
struct ShownFact {
    std::string text;
};

enum class Event { Add, Update, Delete, None };
const char* event_name(Event event);  // "ADD", "UPDATE", "DELETE", "NONE"

// Step 2 for a fact the conversation states (`forget` false) or one the user
// asked to forget
// (`forget` true: the answer can only be DELETE or NONE). `shown` is not empty.
std::vector<jinja::ChatMessage> decision_prompt(const std::string& candidate,
                                                const std::vector<ShownFact>& shown, bool forget);
// {"event": ..., "id": <a position in shown> | null, "text": string}.
nlohmann::json decision_schema(std::size_t num_shown, bool forget);

}  // namespace inferscale::extract
