package pg

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// Encryption at rest (docs/storage.md, "Sealed payloads"). The payload
// of a frame written for a queue with encryptionEnabled is stored sealed with
// AES-256-GCM, and its frame carries frameSealed:
//
//	key id, 4 bytes (keyIDOf)
//	nonce, 16 bytes, random, fresh for every frame
//	ciphertext, as long as the payload, then the 16-byte tag
//
// The frame's message id is the additional data, so a sealed payload does not
// open in another frame. The nonce has the reference server's IV size: GCM
// hashes a nonce that is not 96 bits long into its initial counter, so two
// random 128-bit nonces only harm when their counter ranges overlap, far less
// likely than two random 96-bit nonces colliding.
const (
	keyIDSize      = 4
	nonceSize      = 16
	tagSize        = 16
	sealedOverhead = keyIDSize + nonceSize + tagSize
)

// keyID names a key inside sealed payloads.
type keyID [keyIDSize]byte

// sealKey is one AES-256-GCM key.
type sealKey struct {
	id   keyID
	aead cipher.AEAD
}

func newSealKey(key []byte) (*sealKey, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("an encryption key is 32 bytes (AES-256), not %d", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCMWithNonceSize(b, nonceSize)
	if err != nil {
		return nil, err
	}
	return &sealKey{id: keyIDOf(key), aead: g}, nil
}

// keyIDOf is the first 4 bytes of SHA-256("queengo key id\x00" || key):
// enough to tell a store's keys apart, nothing about the key.
func keyIDOf(key []byte) keyID {
	h := sha256.New()
	h.Write([]byte("queengo key id\x00"))
	h.Write(key)
	return keyID(h.Sum(nil))
}

// KeyID is the id, in hex, under which payloads sealed with key are stored
// and logged: what the logs of a broker started with key report.
func KeyID(key []byte) string {
	id := keyIDOf(key)
	return hex.EncodeToString(id[:])
}

// keyring is the keys that open sealed payloads, by id: one Store's key and
// read keys (Config.EncryptionKey, EncryptionReadKeys), and no other
// store's, so a store opens only what a broker configured as it is could.
// Open builds it and nothing changes it, so readers share it without a lock;
// a nil keyring opens nothing.
type keyring map[keyID]cipher.AEAD

// loadKeys returns the key cfg seals with (nil: none) and the keyring of
// that key and the read keys.
func loadKeys(cfg Config) (*sealKey, keyring, error) {
	var seal *sealKey
	keys := keyring{}
	if len(cfg.EncryptionKey) > 0 {
		k, err := newSealKey(cfg.EncryptionKey)
		if err != nil {
			return nil, nil, fmt.Errorf("error loading the encryption key: %w", err)
		}
		seal = k
		keys[k.id] = k.aead
	}
	for i, b := range cfg.EncryptionReadKeys {
		k, err := newSealKey(b)
		if err != nil {
			return nil, nil, fmt.Errorf("error loading encryption read key %d: %w", i+1, err)
		}
		keys[k.id] = k.aead
	}
	return seal, keys, nil
}

// sealer seals the payloads of one write with key. Their nonces are drawn
// from crypto/rand together (reserve), one read per write rather than one
// per frame; a sealer is never shared, so no nonce is handed out twice.
type sealer struct {
	key    *sealKey
	nonces []byte // drawn, not yet used
}

// reserve draws the nonces of the next n seals.
func (s *sealer) reserve(n int) {
	s.nonces = make([]byte, n*nonceSize)
	_, _ = rand.Read(s.nonces) // never fails (crypto/rand)
}

// appendSealed appends payload sealed for the frame whose message id is id
// (16 bytes; it may be the id already encoded in dst, which spares a copy to
// the heap).
func (s *sealer) appendSealed(dst, id, payload []byte) []byte {
	if len(s.nonces) < nonceSize {
		s.reserve(1)
	}
	nonce := s.nonces[:nonceSize:nonceSize]
	s.nonces = s.nonces[nonceSize:]
	dst = append(dst, s.key.id[:]...)
	dst = append(dst, nonce...)
	return s.key.aead.Seal(dst, nonce, payload, id)
}

// openSealed returns the payload sealed for the frame whose message id is
// id, in a buffer of its own, opened with a key of keys. A payload sealed
// with a key that keys lacks is queengo.ErrEncryptionKeyUnknown; a payload
// its key does not authenticate (altered, or moved from another frame) is
// errCorruptFrame.
func openSealed(sealed, id []byte, keys keyring) ([]byte, error) {
	if len(sealed) < sealedOverhead {
		return nil, errCorruptFrame
	}
	aead := keys[keyID(sealed)]
	if aead == nil {
		return nil, fmt.Errorf("%w: message %s is sealed with key id %x", queengo.ErrEncryptionKeyUnknown, uuid.UUID(id),
			sealed[:keyIDSize])
	}
	nonce := sealed[keyIDSize : keyIDSize+nonceSize]
	p, err := aead.Open(nil, nonce, sealed[keyIDSize+nonceSize:], id)
	if err != nil {
		return nil, fmt.Errorf("%w: the sealed payload of message %s does not authenticate with key id %x", errCorruptFrame,
			uuid.UUID(id), sealed[:keyIDSize])
	}
	return p, nil
}
