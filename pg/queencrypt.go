package pg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// The reference server's encrypted payloads. With encryptionEnabled and
// QUEEN_ENCRYPTION_KEY (64 hex digits: the AES-256 key) it stores a payload
// as the JSON object {"encrypted", "iv", "authTag"}, each base64: the
// AES-256-GCM ciphertext of the payload's JSON text, a 16-byte IV and the
// 16-byte tag, without additional data. Its OpenSSL calls never set the IV
// length, so GCM runs with OpenSSL's default of 12 bytes and only the IV's
// first 12 bytes count: the last 4 are stored but never used (checked
// against payloads the reference build in ../shared/reference sealed;
// queencrypt_test.go holds some).
//
// Such a payload cannot become a queengo sealed payload as it is: queengo's
// seal authenticates the frame's message id as additional data and names
// its key (pg/seal.go), neither of which Queen's ciphertext carries. The
// importer opens it here and the target store seals it again with its own
// key, the same QUEEN_ENCRYPTION_KEY (docs/operations.md).

// queenIVUsed is how many bytes of Queen's 16-byte IV GCM uses.
const queenIVUsed = 12

// errQueenKeyUnknown is an encrypted Queen payload that none of the keys
// opens.
var errQueenKeyUnknown = errors.New("the payload is encrypted and no key given (QUEEN_ENCRYPTION_KEY) opens it")

// queenKey is one key Queen may have encrypted with.
type queenKey struct{ aead cipher.AEAD }

// loadQueenKeys makes the keys that open Queen's payloads.
func loadQueenKeys(keys [][]byte) ([]queenKey, error) {
	out := make([]queenKey, 0, len(keys))
	for i, k := range keys {
		if len(k) != 32 {
			return nil, fmt.Errorf("encryption key %d is %d bytes, not 32 (AES-256)", i+1, len(k))
		}
		b, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		g, err := cipher.NewGCM(b) // the standard 12-byte nonce: queenIVUsed
		if err != nil {
			return nil, err
		}
		out = append(out, queenKey{aead: g})
	}
	return out, nil
}

// openQueen returns the payload that the Queen envelope env (its jsonb
// text) encrypts, with the first key of keys that opens it.
func openQueen(env []byte, keys []queenKey) ([]byte, error) {
	var e struct {
		Encrypted, IV, AuthTag string
	}
	if err := json.Unmarshal(env, &e); err != nil || e.Encrypted == "" && e.IV == "" {
		return nil, fmt.Errorf("an encrypted payload is not Queen's {encrypted, iv, authTag} object")
	}
	ct, err1 := base64.StdEncoding.DecodeString(e.Encrypted)
	iv, err2 := base64.StdEncoding.DecodeString(e.IV)
	tag, err3 := base64.StdEncoding.DecodeString(e.AuthTag)
	if err := errors.Join(err1, err2, err3); err != nil || len(iv) < queenIVUsed || len(tag) != 16 {
		return nil, fmt.Errorf("an encrypted payload's encrypted, iv or authTag is not what Queen writes")
	}
	sealed := append(ct, tag...)
	for _, k := range keys {
		if p, err := k.aead.Open(nil, iv[:queenIVUsed], sealed, nil); err == nil {
			return p, nil
		}
	}
	return nil, errQueenKeyUnknown
}
