// Package hatest holds the black-box tests of the broker on a highly
// available PostgreSQL (issue 41): multi-host database URLs, read-only
// servers, and a failover of a primary to its streaming standby, on private
// clusters (e2e.NewPrimary, e2e.NewStandby) the tests kill and promote. They
// skip when initdb cannot be found.
package hatest

import (
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "hatest") }
