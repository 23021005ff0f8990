// inferscale memory: add, list, delete, search and import a user's memory facts.
//
//   inferscale memory add --user U --text TEXT     prints the new fact's id
//   inferscale memory add --user U --stdin         one fact per line; prints each id once durable
//   inferscale memory list --user U [--json]
//   inferscale memory update --id ID --text TEXT
//   inferscale memory delete --id ID | --user U
//   inferscale memory search --user U --query Q [--top-k K] [--json]
//   inferscale memory import-locomo FILE... [--user U]
//   inferscale memory encode --user U [--context-window W]   (memory_encode.cpp)
// Every command takes --db PATH (default: see default_db_path).

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <unordered_map>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "apps/cli/locomo/locomo_import.h"
#include "apps/cli/memory_commands.h"
#include "memory/memory_store.h"
#include "retrieval/bm25_index.h"

namespace inferscale::cli {
namespace {

namespace fs = std::filesystem;
using memory::Fact;
using memory::MemoryStore;

nlohmann::json fact_json(const Fact& fact) {
    nlohmann::json j = {{"id", fact.id},
                        {"user", fact.user},
                        {"text", fact.text},
                        {"created_at", fact.created_at},
                        {"updated_at", fact.updated_at}};
    if (fact.source)
        j["source"] = {{"session_id", fact.source->session_id},
                       {"turn_index", fact.source->turn_index}};
    return j;
}

int run_add(const DbArgs& db, const std::string& user, const std::string& text, bool from_stdin) {
    if (user.empty()) return fail("--user is required");
    if (from_stdin && !text.empty()) return fail("give --text or --stdin, not both");
    auto store = open_store(db);
    if (!store.ok()) return fail(store.error().message);
    if (!from_stdin) {
        auto fact = (*store)->add_fact(user, {text, {}, ""});
        if (!fact.ok()) return fail(fact.error().message);
        std::printf("%lld\n", static_cast<long long>(fact->id));
        return 0;
    }
    // Each line is its own transaction, and its id is printed (and flushed) only once the
    // commit is durable: a reader of stdout never sees an id the file could lose.
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        auto fact = (*store)->add_fact(user, {line, {}, ""});
        if (!fact.ok()) return fail(fact.error().message);
        std::printf("%lld\n", static_cast<long long>(fact->id));
        std::fflush(stdout);
    }
    return 0;
}

int run_list(const DbArgs& db, const std::string& user, bool json) {
    if (user.empty()) return fail("--user is required");
    auto store = open_store(db);
    if (!store.ok()) return fail(store.error().message);
    auto facts = (*store)->list_facts(user);
    if (!facts.ok()) return fail(facts.error().message);
    if (json) {
        nlohmann::json out = nlohmann::json::array();
        for (const Fact& fact : *facts) out.push_back(fact_json(fact));
        std::printf("%s\n", out.dump(1).c_str());
        return 0;
    }
    for (const Fact& fact : *facts)
        std::printf("%lld\t%s\t%s\n", static_cast<long long>(fact.id), fact.created_at.c_str(),
                    fact.text.c_str());
    return 0;
}

int run_update(const DbArgs& db, std::optional<long long> id, const std::string& text) {
    if (!id) return fail("--id is required");
    auto store = open_store(db);
    if (!store.ok()) return fail(store.error().message);
    auto fact = (*store)->update_fact(*id, text);
    if (!fact.ok()) return fail(fact.error().message);
    std::printf("updated fact %lld\n", *id);
    return 0;
}

int run_delete(const DbArgs& db, std::optional<long long> id, const std::string& user) {
    if (id.has_value() == !user.empty()) return fail("give exactly one of --id and --user");
    auto store = open_store(db);
    if (!store.ok()) return fail(store.error().message);
    if (!user.empty()) {
        auto facts = (*store)->list_facts(user);
        if (!facts.ok()) return fail(facts.error().message);
        if (auto done = (*store)->delete_user(user); !done.ok()) return fail(done.error().message);
        std::printf("deleted user %s and %zu facts\n", user.c_str(), facts->size());
        return 0;
    }
    if (auto done = (*store)->delete_fact(*id); !done.ok()) return fail(done.error().message);
    std::printf("deleted fact %lld\n", *id);
    return 0;
}

int run_search(const DbArgs& db, const std::string& user, const std::string& query, int top_k,
               bool json) {
    if (user.empty()) return fail("--user is required");
    if (query.empty()) return fail("--query is required");
    if (top_k < 1) return fail("--top-k must be at least 1");
    auto store = open_store(db);
    if (!store.ok()) return fail(store.error().message);
    auto facts = (*store)->list_facts(user);
    if (!facts.ok()) return fail(facts.error().message);
    retrieval::Bm25Index index;
    std::unordered_map<memory::FactId, const Fact*> by_id;
    for (const Fact& fact : *facts) {
        index.upsert(user, fact.id, fact.text);
        by_id[fact.id] = &fact;
    }
    const auto hits = index.search(user, query, static_cast<std::size_t>(top_k));
    if (json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& hit : hits) {
            nlohmann::json j = fact_json(*by_id.at(hit.fact_id));
            j["score"] = hit.score;
            out.push_back(std::move(j));
        }
        std::printf("%s\n", out.dump(1).c_str());
        return 0;
    }
    for (const auto& hit : hits)
        std::printf("%lld\t%.4f\t%s\n", static_cast<long long>(hit.fact_id), hit.score,
                    by_id.at(hit.fact_id)->text.c_str());
    return 0;
}

int run_import(const DbArgs& db, const std::vector<std::string>& files, const std::string& user) {
    if (files.empty()) return fail("give at least one LoCoMo JSON file");
    if (!user.empty() && files.size() > 1) return fail("--user applies to a single file");
    auto store = open_store(db);
    if (!store.ok()) return fail(store.error().message);
    for (const std::string& file : files) {
        const std::string label = "importing " + fs::path(file).filename().string();
        auto report = memory::import_locomo(**store, file, user, progress_bar(label));
        if (!report.ok()) return fail(file + ": " + report.error().message);
        std::printf("imported user %s: %zu sessions, %zu turns (%zu empty skipped), %zu facts "
                    "(%zu without a source turn)\n",
                    report->user.c_str(), report->sessions, report->turns, report->skipped_turns,
                    report->facts, report->facts_without_source);
    }
    return 0;
}

}  // namespace

Command add_memory_command(CLI::App& app) {
    struct Args {
        DbArgs db;
        std::string user, text, query;
        bool from_stdin = false, json = false;
        long long id = 0;
        int top_k = 5;
        std::vector<std::string> files;
    };
    auto args = std::make_shared<Args>();
    CLI::App* memory = app.add_subcommand("memory", "manage users' memory facts");
    memory->require_subcommand(1);

    CLI::App* add = memory->add_subcommand("add", "add a fact; prints its id");
    add->add_option("--user", args->user, "user id");
    add->add_option("--text", args->text, "the fact");
    add->add_flag("--stdin", args->from_stdin, "add each line of stdin as a fact");
    add_db_flag(*add, args->db);

    CLI::App* list = memory->add_subcommand("list", "list a user's facts: id, created, text");
    list->add_option("--user", args->user, "user id");
    list->add_flag("--json", args->json, "print JSON");
    add_db_flag(*list, args->db);

    CLI::App* update = memory->add_subcommand("update", "replace a fact's text");
    CLI::Option* update_id = update->add_option("--id", args->id, "fact id");
    update->add_option("--text", args->text, "the new text");
    add_db_flag(*update, args->db);

    CLI::App* del = memory->add_subcommand("delete", "delete one fact, or a user and all theirs");
    CLI::Option* del_id = del->add_option("--id", args->id, "fact id");
    del->add_option("--user", args->user, "user id: deletes the user's facts and turns");
    add_db_flag(*del, args->db);

    CLI::App* search = memory->add_subcommand("search", "BM25 search of a user's facts");
    search->add_option("--user", args->user, "user id");
    search->add_option("--query", args->query, "search text");
    search->add_option("--top-k", args->top_k, "how many facts")->capture_default_str();
    search->add_flag("--json", args->json, "print JSON");
    add_db_flag(*search, args->db);

    CLI::App* import = memory->add_subcommand("import-locomo", "import LoCoMo conversation files");
    import->add_option("files", args->files, "LoCoMo JSON files, one conversation each");
    import->add_option("--user", args->user, "user id (default: the file name without .json)");
    add_db_flag(*import, args->db);

    const std::function<int()> encode = add_memory_encode_command(*memory);

    return [args, add, list, update, update_id, del, del_id, search, import, encode]() -> int {
        const Args& a = *args;
        if (const int rc = encode(); rc >= 0) return rc;
        if (add->parsed()) return run_add(a.db, a.user, a.text, a.from_stdin);
        if (list->parsed()) return run_list(a.db, a.user, a.json);
        if (update->parsed())
            return run_update(a.db, update_id->count() ? std::optional(a.id) : std::nullopt,
                              a.text);
        if (del->parsed())
            return run_delete(a.db, del_id->count() ? std::optional(a.id) : std::nullopt, a.user);
        if (search->parsed()) return run_search(a.db, a.user, a.query, a.top_k, a.json);
        if (import->parsed()) return run_import(a.db, a.files, a.user);
        return fail("unknown memory command");
    };
}

}  // namespace inferscale::cli
