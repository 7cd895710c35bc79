package pgtest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
)

// QueenEncrypt returns payload as a reference Queen server with key
// (QUEEN_ENCRYPTION_KEY, 32 bytes) stores it in an encrypted queue: the
// JSON object {"encrypted", "iv", "authTag"}, AES-256-GCM under a random
// 16-byte IV of which GCM uses the first 12 (pg/queencrypt.go says why).
// For tests that fill a Queen database.
func QueenEncrypt(key, payload []byte) (string, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return "", err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return "", err
	}
	iv := make([]byte, 16)
	if _, err := rand.Read(iv); err != nil {
		return "", err
	}
	sealed := g.Seal(nil, iv[:12], payload, nil)
	ct, tag := sealed[:len(sealed)-16], sealed[len(sealed)-16:]
	out, err := json.Marshal(map[string]string{"encrypted": base64.StdEncoding.EncodeToString(ct),
		"iv": base64.StdEncoding.EncodeToString(iv), "authTag": base64.StdEncoding.EncodeToString(tag)})
	return string(out), err
}
