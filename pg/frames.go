package pg

import (
	"encoding/binary"
	"errors"

	"github.com/queengo/queengo"
)

// A segment's frames column is the concatenation of its frames, each encoded
// as:
//
//	flags byte (frameHasTrace, frameHasSub, frameSealed)
//	message id, 16 bytes
//	trace id, 16 bytes, when frameHasTrace
//	uvarint length + transaction id
//	uvarint length + producerSub, when frameHasSub
//	uvarint length + payload (raw JSON), sealed when frameSealed (seal.go)
//
// The payload keeps the exact bytes the producer sent, so a pop writes them
// into its response without parsing or re-encoding them; docs/performance.md
// ("Other measurements") has the measurement against a JSONB column.
const (
	frameHasTrace = 1 << 0
	frameHasSub   = 1 << 1
	// frameSealed is tested by queen.append_segments (sql/functions/append.sql).
	frameSealed = 1 << 2
)

var errCorruptFrame = errors.New("corrupt segment frame")

// appendFrame encodes f onto dst, its payload sealed by seal unless that is
// nil.
func appendFrame(dst []byte, f *queengo.Frame, seal *sealer) []byte {
	var flags byte
	if f.TraceID != ([16]byte{}) {
		flags |= frameHasTrace
	}
	if f.ProducerSub != "" {
		flags |= frameHasSub
	}
	if seal != nil {
		flags |= frameSealed
	}
	dst = append(dst, flags)
	dst = append(dst, f.ID[:]...)
	id := dst[len(dst)-16:]
	if flags&frameHasTrace != 0 {
		dst = append(dst, f.TraceID[:]...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(f.TransactionID)))
	dst = append(dst, f.TransactionID...)
	if flags&frameHasSub != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(f.ProducerSub)))
		dst = append(dst, f.ProducerSub...)
	}
	payload := f.Payload
	if len(payload) == 0 {
		payload = nullJSON
	}
	if seal != nil {
		dst = binary.AppendUvarint(dst, uint64(sealedOverhead+len(payload)))
		return seal.appendSealed(dst, id, payload)
	}
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	return append(dst, payload...)
}

var nullJSON = []byte("null")

// decodeFrame reads the frame at the start of b into f and returns the rest.
// f.Payload aliases b, unless it is sealed: it is then opened with a key of
// keys (the reading Store's) into a buffer of its own (openSealed, which
// says what fails).
func decodeFrame(b []byte, f *queengo.Frame, keys keyring) ([]byte, error) {
	if len(b) < 17 {
		return nil, errCorruptFrame
	}
	flags := b[0]
	id := b[1:17]
	copy(f.ID[:], id)
	b = b[17:]
	f.TraceID = [16]byte{}
	if flags&frameHasTrace != 0 {
		if len(b) < 16 {
			return nil, errCorruptFrame
		}
		copy(f.TraceID[:], b[:16])
		b = b[16:]
	}
	s, b, err := readBytes(b)
	if err != nil {
		return nil, err
	}
	f.TransactionID = string(s)
	f.ProducerSub = ""
	if flags&frameHasSub != 0 {
		if s, b, err = readBytes(b); err != nil {
			return nil, err
		}
		f.ProducerSub = string(s)
	}
	if f.Payload, b, err = readBytes(b); err != nil {
		return nil, err
	}
	if flags&frameSealed != 0 {
		if f.Payload, err = openSealed(f.Payload, id, keys); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func readBytes(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, errCorruptFrame
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}
