/* Password hashing (Argon2id, Debian's libargon2) and the password rules. */
#include <argon2.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "tenant/internal.h"

/* OWASP's minimum for Argon2id (Password Storage Cheat Sheet): 19 MiB,
 * two passes, one lane. About 30-60 ms here: slow for a guesser, cheap
 * enough for a login. */
#define ARGON2_T 2
#define ARGON2_M_KIB 19456
#define ARGON2_P 1
#define SALT_BYTES 16
#define HASH_BYTES 32

int password_hash(const char *password, char *out, size_t outlen)
{
        uint8_t salt[SALT_BYTES];
        if (getrandom(salt, sizeof(salt), 0) != sizeof(salt))
                return -EIO;
        if (argon2_encodedlen(ARGON2_T, ARGON2_M_KIB, ARGON2_P, SALT_BYTES, HASH_BYTES, Argon2_id) > outlen)
                return -ENOBUFS;
        int r = argon2id_hash_encoded(ARGON2_T, ARGON2_M_KIB, ARGON2_P, password, strlen(password), salt,
                                      sizeof(salt), HASH_BYTES, out, outlen);
        return r == ARGON2_OK ? 0 : (r == ARGON2_MEMORY_ALLOCATION_ERROR ? -ENOMEM : -EIO);
}

bool password_verify(const char *encoded, const char *password)
{
        return argon2id_verify(encoded, password, strlen(password)) == ARGON2_OK;
}

int tenant_password_check(const char *password, struct err *err)
{
        size_t n = password ? strlen(password) : 0;
        bool letter = false, digit = false;
        if (n < TENANT_PASSWORD_MIN || n > TENANT_PASSWORD_MAX)
                return err_set(err, ERR_INVALID, EINVAL, "Password must be %d to %d characters long",
                               TENANT_PASSWORD_MIN, TENANT_PASSWORD_MAX);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)password[i];
                letter |= isalpha(c) || c >= 0x80;
                digit |= isdigit(c) != 0;
        }
        if (!letter || !digit)
                return err_set(err, ERR_INVALID, EINVAL, "Password must contain at least one letter and one digit");
        return 0;
}
