/* AES-256-GCM with OpenSSL's EVP API (see seal.h). */
#include "tenant/seal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/b64.h"
#include "base/util.h"

static void ctx_freep(EVP_CIPHER_CTX **c)
{
        EVP_CIPHER_CTX_free(*c);
}
#define _cleanup_ctx_ _cleanup_(ctx_freep)

/* A context keyed for GCM with a 96-bit IV and the aad fed in. */
static int gcm_begin(EVP_CIPHER_CTX *c, bool enc, const uint8_t *key, const uint8_t *nonce, const void *aad,
                     size_t aad_len)
{
        int n;
        if (aad_len > INT_MAX)
                return -EINVAL;
        if (EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) != 1 ||
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, SEAL_NONCE_BYTES, NULL) != 1 ||
            EVP_CipherInit_ex(c, NULL, NULL, key, nonce, enc) != 1)
                return -EIO;
        if (aad_len && EVP_CipherUpdate(c, NULL, &n, aad, (int)aad_len) != 1)
                return -EIO;
        return 0;
}

int seal_encrypt(const uint8_t key[SEAL_KEY_BYTES], const void *aad, size_t aad_len, const void *pt, size_t len,
                 uint8_t *out)
{
        _cleanup_ctx_ EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
        uint8_t *nonce = out, *ct = out + SEAL_NONCE_BYTES, *tag = ct + len;
        int n = 0, fin = 0, r;

        if (len > INT_MAX - 64)
                return -EINVAL;
        if (!c)
                return -ENOMEM;
        if (getrandom(nonce, SEAL_NONCE_BYTES, 0) != SEAL_NONCE_BYTES)
                return -EIO;
        if ((r = gcm_begin(c, true, key, nonce, aad, aad_len)) < 0)
                return r;
        if ((len && EVP_EncryptUpdate(c, ct, &n, pt, (int)len) != 1) || EVP_EncryptFinal_ex(c, ct + n, &fin) != 1 ||
            (size_t)n + (size_t)fin != len ||
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_BYTES, tag) != 1)
                return -EIO;
        return 0;
}

int seal_decrypt(const uint8_t key[SEAL_KEY_BYTES], const void *aad, size_t aad_len, const uint8_t *in, size_t len,
                 uint8_t *out, size_t *ret_len)
{
        _cleanup_ctx_ EVP_CIPHER_CTX *c = NULL;
        int n = 0, fin = 0, r;

        if (len < SEAL_OVERHEAD || len - SEAL_OVERHEAD > INT_MAX - 64)
                return -EINVAL;
        size_t ctlen = len - SEAL_OVERHEAD;
        const uint8_t *ct = in + SEAL_NONCE_BYTES;
        uint8_t tag[SEAL_TAG_BYTES];
        memcpy(tag, ct + ctlen, sizeof(tag));
        if (!(c = EVP_CIPHER_CTX_new()))
                return -ENOMEM;
        if ((r = gcm_begin(c, false, key, in, aad, aad_len)) < 0)
                return r;
        if ((ctlen && EVP_DecryptUpdate(c, out, &n, ct, (int)ctlen) != 1) ||
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_BYTES, tag) != 1)
                return -EIO;
        /* The tag is checked here: on failure the plaintext already written
         * to out is unauthenticated, so wipe it rather than hand it out. */
        if (EVP_DecryptFinal_ex(c, out + n, &fin) != 1) {
                OPENSSL_cleanse(out, ctlen);
                return -EBADMSG;
        }
        *ret_len = (size_t)n + (size_t)fin;
        return 0;
}

static int hexval(int ch)
{
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        ch = tolower(ch);
        return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

static int parse_hex(const char *s, size_t n, uint8_t key[SEAL_KEY_BYTES])
{
        if (n != 2 * SEAL_KEY_BYTES)
                return -EINVAL;
        for (size_t i = 0; i < SEAL_KEY_BYTES; i++) {
                int hi = hexval((unsigned char)s[2 * i]), lo = hexval((unsigned char)s[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                key[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
}

int seal_key_parse(const char *text, uint8_t key[SEAL_KEY_BYTES])
{
        if (!text)
                return -EINVAL;
        while (isspace((unsigned char)*text))
                text++;
        size_t n = strlen(text);
        while (n && isspace((unsigned char)text[n - 1]))
                n--;
        if (parse_hex(text, n, key) == 0)
                return 0;
        _cleanup_free_ unsigned char *raw = NULL;
        size_t rawlen = 0;
        if (b64_decode(text, n, &raw, &rawlen) < 0 || rawlen != SEAL_KEY_BYTES) {
                if (raw)
                        OPENSSL_cleanse(raw, rawlen);
                return -EINVAL;
        }
        memcpy(key, raw, SEAL_KEY_BYTES);
        OPENSSL_cleanse(raw, rawlen);
        return 0;
}

void seal_key_id(const uint8_t key[SEAL_KEY_BYTES], char out[SEAL_KEY_ID_LEN + 1])
{
        uint8_t d[SHA256_DIGEST_LENGTH];
        SHA256(key, SEAL_KEY_BYTES, d);
        for (size_t i = 0; i < SEAL_KEY_ID_LEN / 2; i++)
                snprintf(out + 2 * i, 3, "%02x", d[i]);
}
