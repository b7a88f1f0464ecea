/* The snapshot_profiles table: the controller's internal snapshot
 * profiles (classes of warm sandboxes). Few rows, read whole. */
#include <errno.h>

#include "store/sqlite/sqlite.h"

#define PROFILE_COLUMNS "key, vcpu_count, mem_size_mib, kernel_path, rootfs_path, created_at, version"

static int profile_decode(sqlite3_stmt *st, void *item)
{
        struct snapshot_profile_row *row = item;
        int r;
        if ((r = sq_column_copy(st, 0, row->key, sizeof(row->key))) < 0 ||
            (r = sq_column_copy(st, 3, row->kernel_path, sizeof(row->kernel_path))) < 0 ||
            (r = sq_column_copy(st, 4, row->rootfs_path, sizeof(row->rootfs_path))) < 0)
                return r;
        row->vcpu_count = sq_column_u64(st, 1);
        row->mem_size_mib = sq_column_u64(st, 2);
        row->created_at = sq_column_u64(st, 5);
        row->version = sq_column_u64(st, 6);
        return 0;
}

int sq_snapshot_profile_get(struct store *s, const char *key, struct snapshot_profile_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT " PROFILE_COLUMNS " FROM snapshot_profiles WHERE key = ?", &st, "t",
                             key);
        return r < 0 ? r : profile_decode(st, ret);
}

int sq_snapshot_profile_put(struct store *s, const struct snapshot_profile_row *row, struct snapshot_profile_row *ret)
{
        int r = sq_run(sq_db(s),
                       "INSERT INTO snapshot_profiles(" PROFILE_COLUMNS ") VALUES(?, ?, ?, ?, ?, ?, 1) "
                       "ON CONFLICT(key) DO UPDATE SET vcpu_count = excluded.vcpu_count, "
                       "mem_size_mib = excluded.mem_size_mib, kernel_path = excluded.kernel_path, "
                       "rootfs_path = excluded.rootfs_path, created_at = excluded.created_at, "
                       "version = version + 1",
                       "tuuttu", row->key, row->vcpu_count, row->mem_size_mib, row->kernel_path, row->rootfs_path,
                       row->created_at);
        /* The store core serialises ops: nothing changes it in between. */
        return r < 0 || !ret ? r : sq_snapshot_profile_get(s, row->key, ret);
}

int sq_snapshot_profile_delete(struct store *s, const char *key)
{
        return sq_run_changed(sq_db(s), "DELETE FROM snapshot_profiles WHERE key = ?", "t", key);
}

int sq_snapshot_profile_list(struct store *s, struct store_rows *out)
{
        return sq_list(sq_db(s), "SELECT " PROFILE_COLUMNS " FROM snapshot_profiles ORDER BY created_at DESC, key DESC",
                       out, profile_decode, "");
}
