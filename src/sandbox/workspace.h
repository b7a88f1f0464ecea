/* Durable sandbox workspaces with a hard quota. As root, each workspace is a
 * small ext4 image (bytes and inodes fixed at creation) loop-mounted under
 * <data>/mnt/<id>: guest code hitting the quota gets ENOSPC and can never
 * fill the host disk, the ext4 journal keeps it consistent across kill -9,
 * and the mount is bound into every jail of the sandbox. Without root
 * (rootless mode) it degrades to a plain directory and the quota is only
 * enforced by the files API (documented in docs/contexts.md). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct workspace {
        char image[4096];   /* <data>/sandboxes/<id>/workspace.img */
        char mount[4096];   /* <data>/mnt/<id>: what jails and the files API use */
        bool mounted;
        bool plain;         /* rootless fallback: mount is a plain directory */
        struct ws_pool *pool; /* ready images (ws_pool.h); NULL: format on open */
};

/* Fills paths for sandbox id under data_dir. Nothing is created. */
void workspace_init(struct workspace *ws, const char *data_dir, const char *id);
/* Creates the image if missing and mounts it (idempotent). */
int workspace_open(struct workspace *ws, uint64_t quota_bytes, uint64_t quota_inodes);
/* Formats a new image at path (under a temporary name, then renamed):
 * the usable space at most quota bytes, inodes entries, owned by the jail
 * user. 0 or -errno. */
int workspace_image_create(const char *image, uint64_t quota, uint64_t inodes);
/* Bytes a fresh ext4 image (open fd) leaves for data, from its superblock;
 * UINT64_MAX when it cannot be read. */
uint64_t workspace_image_free_bytes(int fd);
/* Unmounts (the image stays). */
void workspace_close(struct workspace *ws);
/* Unmounts and deletes everything the workspace holds. */
int workspace_destroy(struct workspace *ws);
/* Moves an open (mounted) workspace to sandbox id's paths under data_dir,
 * its contents and every jail's view of it untouched (a warm sandbox
 * taken under a tenant's id). 0, or -errno with ws where it was. */
int workspace_move(struct workspace *ws, const char *data_dir, const char *id);
/* Shutdown: detaches every workspace mount under <data>/mnt, including ones
 * a killed daemon left and this run never used. At start-up such mounts are
 * kept and reused (workspace_open): detaching one and mounting its image
 * again would run two ext4 instances on one image, and writes still cached
 * by the old instance (a guest's last file) would be invisible or lost. */
void workspace_unmount_all(const char *data_dir);
