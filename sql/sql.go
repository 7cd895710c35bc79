// Package sql holds the broker's embedded, numbered schema migrations
// (migrations/NNN_name.up.sql). It imports nothing; package pg applies them.
package sql

import "embed"

// Migrations holds every migration file; names sort in the order they apply.
//
//go:embed migrations/*.sql
var Migrations embed.FS
