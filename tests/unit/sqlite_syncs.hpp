// Counts the syncs SQLite asks of the disk (xSync), by every connection this process opens
// once it is installed: an SQLite VFS of its own, made the default, that passes everything
// to the one it wraps and counts the syncs of each file it opened. For the tests of what the
// history syncs and when, which the disk would not show.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstring>
#include <string>

namespace test_support {

class SqliteSyncs {
  public:
    // Installs it as the default VFS (once per process); from then on sync_count() counts.
    static void install() {
        static const bool done = [] {
            base_ = sqlite3_vfs_find(nullptr);
            vfs_ = *base_;
            vfs_.zName = "sync-counting";
            vfs_.szOsFile = static_cast<int>(sizeof(File)) + base_->szOsFile;
            vfs_.xOpen = open;
            methods_ = {};
            methods_.iVersion = 3;
            methods_.xClose = [](sqlite3_file* f) {
                const int rc = inner(f)->pMethods->xClose(inner(f));
                f->pMethods = nullptr;
                return rc;
            };
            methods_.xRead = [](sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
                return inner(f)->pMethods->xRead(inner(f), b, n, o);
            };
            methods_.xWrite = [](sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
                return inner(f)->pMethods->xWrite(inner(f), b, n, o);
            };
            methods_.xTruncate = [](sqlite3_file* f, sqlite3_int64 s) {
                return inner(f)->pMethods->xTruncate(inner(f), s);
            };
            methods_.xSync = [](sqlite3_file* f, int flags) {
                syncs_.fetch_add(1);
                return inner(f)->pMethods->xSync(inner(f), flags);
            };
            methods_.xFileSize = [](sqlite3_file* f, sqlite3_int64* s) {
                return inner(f)->pMethods->xFileSize(inner(f), s);
            };
            methods_.xLock = [](sqlite3_file* f, int l) {
                return inner(f)->pMethods->xLock(inner(f), l);
            };
            methods_.xUnlock = [](sqlite3_file* f, int l) {
                return inner(f)->pMethods->xUnlock(inner(f), l);
            };
            methods_.xCheckReservedLock = [](sqlite3_file* f, int* r) {
                return inner(f)->pMethods->xCheckReservedLock(inner(f), r);
            };
            methods_.xFileControl = [](sqlite3_file* f, int op, void* a) {
                return inner(f)->pMethods->xFileControl(inner(f), op, a);
            };
            methods_.xSectorSize = [](sqlite3_file* f) {
                return inner(f)->pMethods->xSectorSize(inner(f));
            };
            methods_.xDeviceCharacteristics = [](sqlite3_file* f) {
                return inner(f)->pMethods->xDeviceCharacteristics(inner(f));
            };
            methods_.xShmMap = [](sqlite3_file* f, int i, int s, int e, void volatile** p) {
                return inner(f)->pMethods->xShmMap(inner(f), i, s, e, p);
            };
            methods_.xShmLock = [](sqlite3_file* f, int o, int n, int fl) {
                return inner(f)->pMethods->xShmLock(inner(f), o, n, fl);
            };
            methods_.xShmBarrier = [](sqlite3_file* f) {
                inner(f)->pMethods->xShmBarrier(inner(f));
            };
            methods_.xShmUnmap = [](sqlite3_file* f, int d) {
                return inner(f)->pMethods->xShmUnmap(inner(f), d);
            };
            methods_.xFetch = [](sqlite3_file* f, sqlite3_int64 o, int n, void** p) {
                return inner(f)->pMethods->xFetch(inner(f), o, n, p);
            };
            methods_.xUnfetch = [](sqlite3_file* f, sqlite3_int64 o, void* p) {
                return inner(f)->pMethods->xUnfetch(inner(f), o, p);
            };
            return sqlite3_vfs_register(&vfs_, 1) == SQLITE_OK;
        }();
        (void)done;
    }
    static int sync_count() { return syncs_.load(); }

  private:
    struct File {
        sqlite3_file base;  // pMethods: methods_
    };
    static sqlite3_file* inner(sqlite3_file* f) {
        return reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + sizeof(File));
    }
    static int open(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out) {
        std::memset(f, 0, sizeof(File));
        const int rc = base_->xOpen(base_, name, inner(f), flags, out);
        // Without methods, SQLite does not close what did not open.
        f->pMethods = inner(f)->pMethods != nullptr ? &methods_ : nullptr;
        return rc;
    }

    static inline sqlite3_vfs* base_ = nullptr;
    static inline sqlite3_vfs vfs_{};
    static inline sqlite3_io_methods methods_{};
    static inline std::atomic<int> syncs_{0};
};

}  // namespace test_support
