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
    R"(You keep a list of facts about a person up to date. Compare the new fact with the stored
facts and choose one event:
- ADD: the new fact is about something none of the stored facts covers. Give it as "text".
- UPDATE: the new fact changes or completes stored fact "id" (a new city, a new job, a more
  precise detail). Give the corrected fact, in one sentence, as "text".
- DELETE: the new fact says that stored fact "id" is no longer true, and nothing replaces it.
- NONE: a stored fact already says the same thing.
The stored facts are only the closest ones found; often none of them is about the same thing
as the new fact, and then the answer is ADD.
Answer with a JSON object {"event": ..., "id": ..., "text": ...}.)";

const std::vector<std::pair<std::string, std::string>> kDecisionExamples = {
    {"Stored facts:\n[0] The user lives in Rome.\n[1] The user has a "
     "sister.\nNew fact: The "
     "user moved to Oslo.",
     R"({"event": "UPDATE", "id": 0, "text": "The user lives in Oslo."})"},
    {"Stored facts:\n[0] The user lives in Rome.\n[1] The user has a "
     "sister.\nNew fact: The "
     "user plays the guitar.",
     R"({"event": "ADD", "id": null, "text": "The user plays the guitar."})"},
};

constexpr const char* kForgetRules =
    R"(You keep a list of facts about a person. The person asked you to forget something, or
said it is no longer true. Choose one event:
- DELETE: stored fact "id" is what must be forgotten.
- NONE: no stored fact says it.
Answer with a JSON object {"event": ..., "id": ..., "text": ""}.)";

const std::vector<std::pair<std::string, std::string>> kForgetExamples = {
    {"Stored facts:\n[0] The user has a cat.\n[1] The user drinks "
     "coffee.\nForget: The user "
     "drinks coffee.",
     R"({"event": "DELETE", "id": 1, "text": ""})"},
    {"Stored facts:\n[0] The user has a cat.\nForget: The user owns a boat.",
     R"({"event": "NONE", "id": null, "text": ""})"},
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
    const json list = {{"type", "array"}, {"items", {{"type", "string"}}}};
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
    return {
        {"type", "object"},
        {"properties",
         {{"event", {{"enum", events}}}, {"id", {{"enum", ids}}}, {"text", {{"type", "string"}}}}},
        {"required", {"event", "id", "text"}},
        {"additionalProperties", false}};
}

}  // namespace inferscale::extract
