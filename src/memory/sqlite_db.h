#pragma once
// Thin RAII wrappers over the SQLite C API that turn its error codes into Result values.
// Internal to the memory component: nothing outside src/memory includes this.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace inferscale::memory {

class SqliteDb;

// One prepared statement. Not thread-safe; used under the owner's lock.
class Statement {
  public:
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&&) = delete;
    Statement(const Statement&) = delete;
    ~Statement();

    // Parameters are 1-based, as in SQL's ?1, ?2, ...; text is copied.
    Statement& bind(int index, std::string_view text);
    Statement& bind(int index, std::int64_t value);
    Statement& bind_null(int index);
    Statement& bind_blob(int index, std::span<const std::byte> bytes);  // copied

    // True when a row is ready, false when done.
    Result<bool> step();
    // Steps to completion, for statements that return no rows.
    Status run();

    std::int64_t column_int64(int index) const;  // 0-based
    std::string column_text(int index) const;    // "" for NULL
    bool column_is_null(int index) const;
    std::span<const std::byte> column_blob(int index) const;  // valid until the next step

  private:
    friend class SqliteDb;
    Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
    sqlite3* db_;
    sqlite3_stmt* stmt_;
};

class SqliteDb {
  public:
    // Opens (creating when missing) a database file. The connection is single-threaded: the
    // caller serializes all use.
    static Result<SqliteDb> open(const std::string& path);

    SqliteDb(SqliteDb&& other) noexcept;
    SqliteDb& operator=(SqliteDb&& other) noexcept;
    SqliteDb(const SqliteDb&) = delete;
    ~SqliteDb();

    Status exec(const char* sql);  // one or more statements, no rows read
    Result<Statement> prepare(std::string_view sql);
    // The single value of a one-row, one-column query (a PRAGMA, a count).
    Result<std::string> query_text(const char* sql);
    Result<std::int64_t> query_int64(const char* sql);

    std::int64_t last_insert_rowid() const;
    const std::string& path() const { return path_; }

  private:
    SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
    sqlite3* db_ = nullptr;
    std::string path_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back on destruction unless committed. IMMEDIATE takes the
// write lock at the start, so two processes never both read and then fail to upgrade.
class Transaction {
  public:
    static Result<Transaction> begin(SqliteDb& db);
    Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
    Transaction(const Transaction&) = delete;
    ~Transaction();
    Status commit();

  private:
    explicit Transaction(SqliteDb* db) : db_(db) {}
    SqliteDb* db_;
};

}  // namespace inferscale::memory
