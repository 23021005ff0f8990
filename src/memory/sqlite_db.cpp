#include "memory/sqlite_db.h"

#include <sqlite3.h>

#include <utility>

namespace inferscale::memory {

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
    other.stmt_ = nullptr;
}

Statement::~Statement() {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int index, std::string_view text) {
    // Bind errors are out-of-range indices or out of memory: bugs, surfaced at step().
    sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    return *this;
}

Statement& Statement::bind(int index, std::int64_t value) {
    sqlite3_bind_int64(stmt_, index, value);
    return *this;
}

Statement& Statement::bind_null(int index) {
    sqlite3_bind_null(stmt_, index);
    return *this;
}

Statement& Statement::bind_blob(int index, std::span<const std::byte> bytes) {
    sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
    return *this;
}

Result<bool> Statement::step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return make_error(std::string("sqlite: ") + sqlite3_errmsg(db_));
}

Status Statement::run() {
    while (IS_TRY(step())) {
    }
    return {};
}

std::int64_t Statement::column_int64(int index) const {
    return sqlite3_column_int64(stmt_, index);
}

std::string Statement::column_text(int index) const {
    const auto* text = sqlite3_column_text(stmt_, index);
    if (text == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(text),
                       static_cast<std::size_t>(sqlite3_column_bytes(stmt_, index)));
}

bool Statement::column_is_null(int index) const {
    return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

std::span<const std::byte> Statement::column_blob(int index) const {
    const auto* data = static_cast<const std::byte*>(sqlite3_column_blob(stmt_, index));
    return {data, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, index))};
}

Result<SqliteDb> SqliteDb::open(const std::string& path) {
    sqlite3* db = nullptr;
    // NOMUTEX: the owner serializes access, so SQLite's own per-call mutex is redundant.
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
    if (rc != SQLITE_OK) {
        std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        sqlite3_close(db);
        return make_error("cannot open memory database " + path + ": " + message);
    }
    sqlite3_extended_result_codes(db, 1);
    return SqliteDb(db, path);
}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
    if (this != &other) {
        if (db_ != nullptr) sqlite3_close(db_);
        db_ = std::exchange(other.db_, nullptr);
        path_ = std::move(other.path_);
    }
    return *this;
}

SqliteDb::~SqliteDb() {
    // Statements never outlive a call, so close cannot fail with SQLITE_BUSY.
    if (db_ != nullptr) sqlite3_close(db_);
}

Status SqliteDb::exec(const char* sql) {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
        std::string text = message ? message : sqlite3_errmsg(db_);
        sqlite3_free(message);
        return make_error("sqlite: " + text);
    }
    return {};
}

Result<Statement> SqliteDb::prepare(std::string_view sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
        SQLITE_OK)
        return make_error(std::string("sqlite: ") + sqlite3_errmsg(db_));
    return Statement(db_, stmt);
}

Result<std::string> SqliteDb::query_text(const char* sql) {
    Statement stmt = IS_TRY(prepare(sql));
    if (!IS_TRY(stmt.step())) return make_error(std::string("sqlite: no row from ") + sql);
    return stmt.column_text(0);
}

Result<std::int64_t> SqliteDb::query_int64(const char* sql) {
    Statement stmt = IS_TRY(prepare(sql));
    if (!IS_TRY(stmt.step())) return make_error(std::string("sqlite: no row from ") + sql);
    return stmt.column_int64(0);
}

std::int64_t SqliteDb::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

Result<Transaction> Transaction::begin(SqliteDb& db) {
    IS_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
    return Transaction(&db);
}

Transaction::~Transaction() {
    if (db_ != nullptr) (void)db_->exec("ROLLBACK");
}

Status Transaction::commit() {
    IS_CHECK(db_ != nullptr) << "commit twice";
    IS_RETURN_IF_ERROR(db_->exec("COMMIT"));
    db_ = nullptr;
    return {};
}

}  // namespace inferscale::memory
