// Package sql holds the broker's embedded SQL; package pg applies it. It
// imports nothing.
//
// migrations/NNN_name.up.sql are the numbered schema migrations: tables,
// indexes, constraints and the one trigger (with a first version of the
// trigger function it needs; the current one is in functions), DDL only.
// Each is applied once, in version order, and recorded in
// queen.schema_migrations.
//
// functions/*.sql hold every other function (the hot PL/pgSQL of append,
// claim and ack included). They are applied after the migrations at every
// start and by `queengo migrate`, under the migrations' advisory lock, in
// file-name order, all in one transaction, so they must be idempotent:
// CREATE OR REPLACE FUNCTION only, and a function whose signature changes is
// dropped first in its file (DROP FUNCTION IF EXISTS with the old
// signature). A function changes by a diff of its file, never by a
// migration. A LANGUAGE sql body is checked when it is created, so a file
// must come after (in name or within the file) the functions it calls.
//
// citus/ is the Citus mode of the schema (docs/scaling.md), applied only on
// a database with the citus extension, idempotent: layout.sql (which table
// is a reference table and which is sharded by partition id, and the
// constraints re-designed for that) after the function files, and
// functions.sql and distribute.sql (the Citus forms of the functions, which
// replace the single-node ones, and the function Citus runs whole on the
// node owning a partition) in the function files' transaction.
package sql

import "embed"

// Migrations holds every migration file; names sort in the order they apply.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Functions holds the function files; names sort in the order they apply.
//
//go:embed functions/*.sql
var Functions embed.FS

// Citus holds the Citus layout (citus/layout.sql).
//
//go:embed citus/*.sql
var Citus embed.FS
