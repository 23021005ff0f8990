// inferscale memory encode: encodes every fact of a user into memory chunks ahead of time, so
// the first questions need no encoding; the chunks land in the pool's disk tier. Shows progress
// and the pool's tiers afterwards.

#include <cstdio>

#include "apps/cli/cli_support.h"
#include "apps/cli/memory_commands.h"
#include "engine/memory_retrieval.h"

namespace inferscale::cli {
namespace {

struct EncodeArgs {
    ModelArgs model;
    DbArgs db;
    ChunkArgs chunks;
    std::string user;
    int context_window = 0;
    std::size_t batch = 64;  // facts per encoding pass
};

void print_tier(const char* name, const memory::TierStats& tier, std::size_t capacity) {
    if (capacity > 0)
        std::printf("  %-6s %7zu chunks %10.1f MiB of %.0f MiB\n", name, tier.chunks,
                    static_cast<double>(tier.bytes) / (1 << 20),
                    static_cast<double>(capacity) / (1 << 20));
    else
        std::printf("  %-6s %7zu chunks %10.1f MiB\n", name, tier.chunks,
                    static_cast<double>(tier.bytes) / (1 << 20));
}

int run_encode(const EncodeArgs& a) {
    if (a.user.empty()) return fail("--user is required");
    auto store = open_store(a.db);
    if (!store.ok()) return fail(store.error().message);
    auto facts = (*store)->list_facts(a.user);
    if (!facts.ok()) return fail(facts.error().message);
    auto loaded = load_model(a.model);
    if (!loaded.ok()) return fail(loaded.error().message);
    engine::LocalModel& lm = **loaded;
    auto runtime = engine::MemoryRuntime::create(lm, memory_options(a.chunks, (*store)->path()));
    if (!runtime.ok()) return fail(runtime.error().message);
    auto memory = engine::memory_facts(lm, **store, a.user, *facts, a.context_window);
    if (!memory.ok()) return fail(memory.error().message);

    const auto progress = progress_bar("encoding " + a.user);
    const std::size_t total = memory->size();
    for (std::size_t done = 0; done < total;) {
        const std::size_t n = std::min(a.batch, total - done);
        // Encodes the misses and adds them to the pool; the leases end at once.
        auto leases = (*runtime)->acquire(std::span(*memory).subspan(done, n));
        if (!leases.ok()) return fail(leases.error().message);
        done += n;
        if (progress) progress(done, total);
    }
    if (Status st = (*runtime)->pool().flush(); !st.ok()) return fail(st.error().message);
    const memory::ChunkPoolStats s = (*runtime)->pool().stats();
    const memory::ChunkPoolOptions& o = (*runtime)->pool().options();
    std::printf("user %s: %zu facts, %llu encoded now, %llu already in the pool\n", a.user.c_str(),
                total, static_cast<unsigned long long>(s.misses),
                static_cast<unsigned long long>(s.hits()));
    std::printf("chunk pool%s%s:\n", o.disk_dir.empty() ? "" : " at ", o.disk_dir.c_str());
    print_tier("device", s.device, o.device_capacity_bytes);
    print_tier("host", s.host, o.host_capacity_bytes);
    print_tier("disk", s.disk, 0);
    return 0;
}

}  // namespace

std::function<int()> add_memory_encode_command(CLI::App& memory) {
    auto a = std::make_shared<EncodeArgs>();
    CLI::App* cmd = memory.add_subcommand(
        "encode", "encode a user's facts into KV chunks ahead of time (kept in the disk tier)");
    cmd->add_option("--user", a->user, "user id");
    cmd->add_option("--context-window", a->context_window,
                    "conversation turns each fact is encoded after")
        ->capture_default_str();
    add_model_flags(*cmd, a->model);
    add_db_flag(*cmd, a->db);
    add_chunk_flags(*cmd, a->chunks);
    return [a, cmd]() -> int { return cmd->parsed() ? run_encode(*a) : -1; };
}

}  // namespace inferscale::cli
