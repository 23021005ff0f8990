#include "extract/extraction_prompts.h"

#include <utility>

namespace inferscale::extract {
namespace {

using nlohmann::json;

constexpr const char* kCandidateRules =
    R"(You write down what an assistant should remember about the people it talks with.
Read the new messages and list the facts worth remembering later: who they are, what they
like or dislike, their plans, work, health, family, friends, pets, places, possessions and
the events of their lives.

Rules:
- One short, self-contained sentence per fact, in the third person. Call the user "The user"
  unless the messages give a name; call other speakers by their names.
- Only what the messages say about the people. Greetings, thanks, small talk and questions
  are not facts, and nothing about the assistant is.
- Turn relative dates ("yesterday", "last week", "next month") into dates when the date of
  the messages is given.
- When the user asks to forget something, or says that something is no longer true without
  saying what replaced it, put that fact under "forget" instead.
- Nothing worth remembering: empty lists.
Answer with a JSON object {"facts": [...], "forget": [...]}.)";

// Worked examples, given as earlier turns of the chat: small models follow a
// shown exchange more reliably than a described one.
const std::vector<std::pair<std::string, std::string>> kCandidateExamples = {
    {"New messages:\nuser: Hi! I'm Dana, I just adopted a beagle called Max. "
     "Oh, and forget "
     "that I play tennis.\nassistant: Congratulations on Max!",
     R"({"facts": ["The user's name is Dana.", "The user adopted a beagle called Max."], "forget": ["The user plays tennis."]})"},
    {"New messages:\nuser: Hello! How are you today? Thanks for the help "
     "earlier.",
     R"({"facts": [], "forget": []})"},
};

constexpr const char* kDecisionRules =
    R"(You keep a list of facts about a person up to date. First find the stored fact that is
about the same thing as the new fact (the same home, the same job, the same pet, ...) and
give its number as "about", or null when no stored fact is. Then choose the event:
- ADD: "about" is null, the new fact is new. Give it as "text".
- UPDATE: the new fact changes or completes that stored fact. Give the corrected fact, in one
  sentence, as "text".
- DELETE: the new fact says that the stored fact is no longer true, and nothing replaces it.
- NONE: the stored fact already says the same thing.
The stored facts are only the closest ones found: often none is about the same thing.
Answer with a JSON object {"about": ..., "event": ..., "text": ...}.)";

const std::vector<std::pair<std::string, std::string>> kDecisionExamples = {
    {"Stored facts:\n[0] The user lives in Rome.\n[1] The user has a sister.\nNew fact: The "
     "user moved to Oslo.",
     R"({"about": 0, "event": "UPDATE", "text": "The user lives in Oslo."})"},
    {"Stored facts:\n[0] The user lives in Rome.\n[1] The user has a sister.\nNew fact: The "
     "user plays the guitar.",
     R"({"about": null, "event": "ADD", "text": "The user plays the guitar."})"},
};

constexpr const char* kForgetRules =
    R"(You keep a list of facts about a person. The person asked you to forget something, or
said it is no longer true. Give the number of the stored fact that says it as "about", or
null when none does, and choose the event:
- DELETE: that stored fact must be forgotten.
- NONE: no stored fact says it.
Answer with a JSON object {"about": ..., "event": ..., "text": ""}.)";

const std::vector<std::pair<std::string, std::string>> kForgetExamples = {
    {"Stored facts:\n[0] The user has a cat.\n[1] The user drinks coffee.\nForget: The user "
     "drinks coffee.",
     R"({"about": 1, "event": "DELETE", "text": ""})"},
    {"Stored facts:\n[0] The user has a cat.\nForget: The user owns a boat.",
     R"({"about": null, "event": "NONE", "text": ""})"},
};

std::vector<jinja::ChatMessage> with_examples(
    const char* rules, const std::vector<std::pair<std::string, std::string>>& examples,
    std::string question) {
    std::vector<jinja::ChatMessage> out = {{"system", rules}};
    for (const auto& [asked, answered] : examples) {
        out.emplace_back("user", asked);
        out.emplace_back("assistant", answered);
    }
    out.emplace_back("user", std::move(question));
    return out;
}

// Bounds each fact the model writes, so a small model that rambles is cut by the grammar, not
// by the token limit (which would fail the whole answer).
constexpr int kMaxFactChars = 300;

std::string numbered(const std::vector<ShownFact>& shown) {
    std::string out;
    for (std::size_t i = 0; i < shown.size(); ++i)
        out += "[" + std::to_string(i) + "] " + shown[i].text + "\n";
    return out;
}

}  // namespace

const char* event_name(Event event) {
    switch (event) {
        case Event::Add:
            return "ADD";
        case Event::Update:
            return "UPDATE";
        case Event::Delete:
            return "DELETE";
        case Event::None:
            return "NONE";
    }
    return "NONE";
}

std::vector<jinja::ChatMessage> candidate_prompt(const std::vector<ConversationMessage>& messages,
                                                 const std::string& date) {
    std::string text = "New messages:\n";
    for (const ConversationMessage& m : messages)
        text += (m.speaker.empty() ? m.role : m.speaker) + ": " + m.content + "\n";
    if (!date.empty()) text += "Date of the messages: " + date + "\n";
    text.pop_back();
    return with_examples(kCandidateRules, kCandidateExamples, std::move(text));
}

json candidate_schema(int max_facts) {
    const json list = {{"type", "array"},
                       {"items", {{"type", "string"}, {"maxLength", kMaxFactChars}}}};
    json facts = list;
    facts["maxItems"] = max_facts;
    json forget = list;
    forget["maxItems"] = 4;
    return {{"type", "object"},
            {"properties", {{"facts", facts}, {"forget", forget}}},
            {"required", {"facts", "forget"}},
            {"additionalProperties", false}};
}

std::vector<jinja::ChatMessage> decision_prompt(const std::string& candidate,
                                                const std::vector<ShownFact>& shown, bool forget) {
    std::string text = "Stored facts:\n" + numbered(shown);
    text += (forget ? "Forget: " : "New fact: ") + candidate;
    return forget ? with_examples(kForgetRules, kForgetExamples, std::move(text))
                  : with_examples(kDecisionRules, kDecisionExamples, std::move(text));
}

json decision_schema(std::size_t num_shown, bool forget) {
    json ids = json::array();
    for (std::size_t i = 0; i < num_shown; ++i) ids.push_back(i);
    ids.push_back(nullptr);
    const json events = forget ? json{"DELETE", "NONE"} : json{"ADD", "UPDATE", "DELETE", "NONE"};
    return {{"type", "object"},
            {"properties",
             {{"about", {{"enum", ids}}},
              {"event", {{"enum", events}}},
              {"text", {{"type", "string"}, {"maxLength", kMaxFactChars}}}}},
            {"required", {"about", "event", "text"}},
            {"additionalProperties", false}};
}

}  // namespace inferscale::extract
