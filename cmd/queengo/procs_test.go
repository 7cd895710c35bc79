package main

import "testing"

// TestProcsFor_OneOnlyOnATwoCPUMachineSharedWithPostgreSQL: the broker
// leaves the runtime's choice of processors alone unless its database is on
// this machine, the machine has two CPUs and the operator set no
// GOMAXPROCS.
func TestProcsFor_OneOnlyOnATwoCPUMachineSharedWithPostgreSQL(t *testing.T) {
	unset := func(string) string { return "" }
	set := func(k string) string { return map[string]string{"GOMAXPROCS": "2"}[k] }
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		local  bool
		n      int
		want   int
	}{
		{"local, 2 CPUs", unset, true, 2, 1},
		{"local, 2 CPUs, GOMAXPROCS set", set, true, 2, 2},
		{"remote, 2 CPUs", unset, false, 2, 2},
		{"local, 1 CPU", unset, true, 1, 1},
		{"local, 4 CPUs", unset, true, 4, 4},
		{"local, 16 CPUs", unset, true, 16, 16},
	} {
		if got := procsFor(tc.getenv, tc.local, tc.n); got != tc.want {
			t.Errorf("%s: %d processors, want %d", tc.name, got, tc.want)
		}
	}
}
