package actors

// GroupStore is what the consumer-group admin routes (shared/spec/api.md §6) need of the store.
type GroupStore interface{}
