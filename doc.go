// Package queengo holds the types shared by the broker's layers: the queue
// options, push items and results, pop requests and results, and the sentinel
// errors that package pg translates database failures into. The HTTP layer
// (package http), the actor tree (package actors) and the store (package pg)
// all speak these types, so none of them imports another's internals.
package queengo
