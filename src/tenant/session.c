/* Login sessions: the signing key in the data dir, issuing a session (a
 * store row + a JWT naming it), checking one, CSRF tokens, logout.
 *
 * A token alone is not enough: its session row must exist, belong to the
 * same user and org, and not be revoked, so logout ends it at once. A new
 * key (--rotate-session-key) makes every earlier token's signature wrong. */
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "base/util.h"
#include "tenant/internal.h"
#include "tenant/jwt.h"

static int key_read(const char *path, uint8_t key[TENANT_SESSION_KEY_BYTES], struct err *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return err_set(err, ERR_INTERNAL, errno, "cannot stat %s", path);
        if (!S_ISREG(st.st_mode) || (st.st_mode & 077) || st.st_size != TENANT_SESSION_KEY_BYTES)
                return err_set(err, ERR_INTERNAL, EPERM,
                               "%s must be a regular file of %d bytes, mode 0600 (remove it to make a new one)",
                               path, TENANT_SESSION_KEY_BYTES);
        int r = read_all(fd, key, TENANT_SESSION_KEY_BYTES);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "cannot read %s", path) : 0;
}

/* Written to a temporary name and renamed, so a crash never leaves a
 * short key behind. */
static int key_write(const char *path, uint8_t key[TENANT_SESSION_KEY_BYTES], struct err *err)
{
        char tmp[4300];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        if (getrandom(key, TENANT_SESSION_KEY_BYTES, 0) != TENANT_SESSION_KEY_BYTES)
                return err_set(err, ERR_INTERNAL, EIO, "no randomness for %s", path);
        unlink(tmp);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return err_set(err, ERR_INTERNAL, errno, "cannot create %s", tmp);
        int r = write_all(fd, key, TENANT_SESSION_KEY_BYTES);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                return err_set(err, ERR_INTERNAL, -r, "cannot write %s", path);
        }
        return 0;
}

int key_file_load(const char *data_dir, const char *name, bool make_new, uint8_t key[TENANT_SESSION_KEY_BYTES],
                  struct err *err)
{
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", data_dir, name);
        if (!make_new) {
                int r = key_read(path, key, err);
                if (r != -ENOENT)
                        return r;
        }
        return key_write(path, key, err);
}

int session_key_load(struct tenant *t, struct err *err)
{
        return key_file_load(t->opt.data_dir, "session.key", t->opt.rotate_session_key, t->key, err);
}

int session_issue(struct tenant *t, const struct user_row *user, struct tenant_session *ret)
{
        uint64_t now = wall_ms();
        struct session_row row = { .created_at = now, .expires_at = now + t->opt.session_ttl_s * 1000 };
        int r = tenant_id_new("ses", row.id);
        if (r < 0)
                return r;
        snprintf(row.user_id, sizeof(row.user_id), "%s", user->id);
        snprintf(row.org_id, sizeof(row.org_id), "%s", user->org_id);
        struct jwt_claims c = { .iat = now / 1000, .exp = row.expires_at / 1000 };
        snprintf(c.sub, sizeof(c.sub), "%s", user->id);
        snprintf(c.org, sizeof(c.org), "%s", user->org_id);
        snprintf(c.sid, sizeof(c.sid), "%s", row.id);
        if ((r = store_session_create(t->store, &row)) < 0)
                return r;
        if ((r = jwt_sign(t->key, sizeof(t->key), &c, &ret->token)) < 0)
                return r;
        snprintf(ret->id, sizeof(ret->id), "%s", row.id);
        ret->expires_at = row.expires_at;
        return 0;
}

void tenant_session_done(struct tenant_session *s)
{
        if (!s)
                return;
        free(s->token);
        s->token = NULL;
}

int tenant_session_authenticate(struct tenant *t, const char *token, struct tenant_principal *ret)
{
        struct jwt_claims c;
        struct session_row row;
        uint64_t now = wall_ms();
        int r = jwt_verify(t->key, sizeof(t->key), token, now / 1000, &c);
        if (r < 0)
                return r;
        r = store_session_get(t->store, c.sid, &row);
        if (r == -ENOENT || (r == 0 && (row.revoked || strcmp(row.user_id, c.sub) || strcmp(row.org_id, c.org))))
                return -EPERM;
        if (r < 0)
                return r;
        if (now >= row.expires_at)
                return -EKEYEXPIRED;
        *ret = (struct tenant_principal){ .expires_at = row.expires_at };
        snprintf(ret->org_id, sizeof(ret->org_id), "%s", row.org_id);
        snprintf(ret->user_id, sizeof(ret->user_id), "%s", row.user_id);
        snprintf(ret->session_id, sizeof(ret->session_id), "%s", row.id);
        return 0;
}

int tenant_logout(struct tenant *t, const char *session_id)
{
        return store_session_revoke(t->store, session_id);
}

void tenant_csrf_token(struct tenant *t, const char *session_id, char out[TENANT_CSRF_LEN + 1])
{
        uint8_t mac[32];
        unsigned int len = 0;
        char msg[STORE_ID_MAX + 8];
        int n = snprintf(msg, sizeof(msg), "csrf:%s", session_id);
        if (!HMAC(EVP_sha256(), t->key, (int)sizeof(t->key), (const unsigned char *)msg, (size_t)n, mac, &len))
                memset(mac, 0, sizeof(mac));
        b64url_encode(mac, sizeof(mac), out);
}

bool tenant_csrf_ok(struct tenant *t, const char *session_id, const char *given)
{
        char want[TENANT_CSRF_LEN + 1];
        if (!given || strlen(given) != TENANT_CSRF_LEN)
                return false;
        tenant_csrf_token(t, session_id, want);
        return CRYPTO_memcmp(want, given, TENANT_CSRF_LEN) == 0;
}
