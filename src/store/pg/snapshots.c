/* The snapshot_profiles table: the controller's internal snapshot
 * profiles (classes of warm sandboxes). Few rows, read whole. */
#include <errno.h>

#include "store/pg/pg.h"

#define PROFILE_COLUMNS "key, vcpu_count, mem_size_mib, kernel_path, rootfs_path, created_at, version"

static int profile_decode(const PGresult *res, int i, void *item)
{
        struct snapshot_profile_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->key, sizeof(row->key))) < 0 ||
            (r = pgs_copy(res, i, 3, row->kernel_path, sizeof(row->kernel_path))) < 0 ||
            (r = pgs_copy(res, i, 4, row->rootfs_path, sizeof(row->rootfs_path))) < 0)
                return r;
        row->vcpu_count = pgs_u64(res, i, 1);
        row->mem_size_mib = pgs_u64(res, i, 2);
        row->created_at = pgs_u64(res, i, 5);
        row->version = pgs_u64(res, i, 6);
        return 0;
}

int pgs_snapshot_profile_get(struct store *s, const char *key, struct snapshot_profile_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT " PROFILE_COLUMNS " FROM snapshot_profiles WHERE key = $1", &res, "t", key);

        return r < 0 ? r : profile_decode(res, 0, ret);
}

/* RETURNING gives the row as this statement left it: ops run concurrently
 * here, so a second read could see another node's later put. */
int pgs_snapshot_profile_put(struct store *s, const struct snapshot_profile_row *row,
                             struct snapshot_profile_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db,
                              "INSERT INTO snapshot_profiles(" PROFILE_COLUMNS ") VALUES($1, $2, $3, $4, $5, $6, 1) "
                              "ON CONFLICT(key) DO UPDATE SET vcpu_count = EXCLUDED.vcpu_count, "
                              "mem_size_mib = EXCLUDED.mem_size_mib, kernel_path = EXCLUDED.kernel_path, "
                              "rootfs_path = EXCLUDED.rootfs_path, created_at = EXCLUDED.created_at, "
                              "version = snapshot_profiles.version + 1 RETURNING " PROFILE_COLUMNS,
                              &res, "tuuttu", row->key, row->vcpu_count, row->mem_size_mib, row->kernel_path,
                              row->rootfs_path, row->created_at);

        return r < 0 || !ret ? r : profile_decode(res, 0, ret);
}

int pgs_snapshot_profile_delete(struct store *s, const char *key)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM snapshot_profiles WHERE key = $1", "t", key);
}

int pgs_snapshot_profile_list(struct store *s, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db, "SELECT " PROFILE_COLUMNS " FROM snapshot_profiles ORDER BY created_at DESC, key DESC",
                        out, profile_decode, "");
}
