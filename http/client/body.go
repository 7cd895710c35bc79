package client

// The push and batch-ack bodies are appended to a caller's buffer without
// reflection: the load generator builds one per request, and encoding/json
// would cost it CPU the broker under test needs.

// PushItem is one message of a push body.
type PushItem struct {
	// Partition is the partition's name; empty leaves it out (the queue's
	// Default partition).
	Partition string
	// TransactionID identifies the message for dedupe and acks; empty
	// leaves it out (the broker makes one). It is bytes so that a caller
	// can cut the ids of a batch out of one reused buffer.
	TransactionID []byte
	// Payload is the message's JSON, written as it is: it must be valid
	// JSON. Empty is sent as null.
	Payload []byte
}

// AppendPushBody appends the push body {"items":[...]} of items, all for
// queue, to dst (docs/api.md "POST /api/v1/push").
func AppendPushBody(dst []byte, queue string, items []PushItem) []byte {
	dst = append(dst, `{"items":[`...)
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"queue":`...)
		dst = AppendJSONString(dst, queue)
		if it.Partition != "" {
			dst = append(dst, `,"partition":`...)
			dst = AppendJSONString(dst, it.Partition)
		}
		if len(it.TransactionID) > 0 {
			dst = append(dst, `,"transactionId":`...)
			dst = AppendJSONString(dst, it.TransactionID)
		}
		dst = append(dst, `,"payload":`...)
		if len(it.Payload) == 0 {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, it.Payload...)
		}
		dst = append(dst, '}')
	}
	return append(dst, `]}`...)
}

// Ack names one popped message to acknowledge, by the ids its pop answer
// gave it.
type Ack struct {
	TransactionID string
	PartitionID   string
	// LeaseID is the pop's lease; empty leaves it out (the ack is then
	// checked against the cursor's live lease only).
	LeaseID string
}

// AppendAckBody appends the batch ack body of docs/api.md "POST /api/v1/ack/batch" to dst: every ack
// with status ("completed" or "failed"), for group (empty: queue mode,
// sent as null).
func AppendAckBody(dst []byte, group, status string, acks []Ack) []byte {
	dst = append(dst, `{"acknowledgments":[`...)
	for i, a := range acks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"transactionId":`...)
		dst = AppendJSONString(dst, a.TransactionID)
		dst = append(dst, `,"partitionId":`...)
		dst = AppendJSONString(dst, a.PartitionID)
		dst = append(dst, `,"status":`...)
		dst = AppendJSONString(dst, status)
		if a.LeaseID != "" {
			dst = append(dst, `,"leaseId":`...)
			dst = AppendJSONString(dst, a.LeaseID)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"consumerGroup":`...)
	if group == "" {
		dst = append(dst, "null"...)
	} else {
		dst = AppendJSONString(dst, group)
	}
	return append(dst, '}')
}

// AppendJSONString appends s to dst as a JSON string literal: '"' and '\'
// escaped, control characters as \u00XX, every other byte as it is (s
// should be UTF-8, as every name and id of the API is).
func AppendJSONString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '"' || ch == '\\':
			dst = append(dst, '\\', ch)
		case ch < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&15])
		default:
			dst = append(dst, ch)
		}
	}
	return append(dst, '"')
}
