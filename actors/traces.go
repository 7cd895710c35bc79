package actors

// TraceStore is what the trace routes (shared/spec/api.md §4.7) need of the store.
type TraceStore interface{}
