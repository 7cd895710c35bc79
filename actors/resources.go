package actors

// ResourceStore is what the resource and message routes (shared/spec/api.md §7.2-7.4, §8) need of the store.
type ResourceStore interface{}
