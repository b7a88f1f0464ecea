/* AES-256-GCM sealing of small values (the controller's secrets) with
 * OpenSSL's EVP interface. A sealed value is nonce || ciphertext || tag:
 * a fresh random 96-bit nonce per seal (NIST SP 800-38D §8.2.2: random
 * nonces are safe for up to 2^32 seals under one key), and a 128-bit tag
 * over the ciphertext and the associated data (aad), so a sealed value
 * opens only with the same key AND the same aad: callers bind it to where
 * it is stored (org + name), and a ciphertext copied to another row fails.
 * No HTTP, no logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SEAL_KEY_BYTES 32
#define SEAL_NONCE_BYTES 12
#define SEAL_TAG_BYTES 16
#define SEAL_OVERHEAD (SEAL_NONCE_BYTES + SEAL_TAG_BYTES)
/* seal_key_id's text: hex of the first 8 bytes of SHA-256(key). */
#define SEAL_KEY_ID_LEN 16

/* Seals pt[0..len) into out (len + SEAL_OVERHEAD bytes). 0, -EIO (no
 * randomness, or OpenSSL failed), -EINVAL (len above INT_MAX). */
int seal_encrypt(const uint8_t key[SEAL_KEY_BYTES], const void *aad, size_t aad_len, const void *pt, size_t len,
                 uint8_t *out);
/* Opens in[0..len) into out (len - SEAL_OVERHEAD bytes) and *ret_len.
 * -EBADMSG: authentication failed (another key, another aad, a changed
 * byte) and nothing of out may be used; -EINVAL: shorter than a nonce and
 * a tag; -EIO: OpenSSL failed. */
int seal_decrypt(const uint8_t key[SEAL_KEY_BYTES], const void *aad, size_t aad_len, const uint8_t *in, size_t len,
                 uint8_t *out, size_t *ret_len);
/* A key given as text: 64 hex digits, or base64 (standard alphabet,
 * padding optional) of exactly 32 bytes. Surrounding blanks are ignored.
 * 0 or -EINVAL. */
int seal_key_parse(const char *text, uint8_t key[SEAL_KEY_BYTES]);
/* A key's public fingerprint (which key sealed a row), never the key. */
void seal_key_id(const uint8_t key[SEAL_KEY_BYTES], char out[SEAL_KEY_ID_LEN + 1]);
