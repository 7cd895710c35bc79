package actors

// StatusStore is what the status and analytics routes and the metrics collector (shared/spec/api.md §2, §7.5) need of the store.
type StatusStore interface{}
