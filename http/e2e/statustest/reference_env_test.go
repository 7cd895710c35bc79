package statustest

import (
	"net/url"
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// A Queen deployment's environment works unchanged: a broker configured
// only with the reference server's names (the database from PG_* parts
// with PG_USE_SSL=false, the DB_* connection settings, EVICTION_BATCH_SIZE,
// and engine-tuning names that mean nothing here) starts, pushes and pops,
// shows the names it honours in GET /api/v1/system/config, and logs each
// name it ignores once, with the reason.
func TestSystemConfig_ReferenceEnvironmentWorks(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "refenv")
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	ignored := []string{"NUM_WORKERS", "SIDECAR_POOL_SIZE", "STATS_INTERVAL_MS", "QUEEN_UDP_PEERS", "QUEEN_SYNC_ENABLED"}
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: []string{"DATABASE_URL=", // the harness's DATABASE_URL taken away
		"PG_HOST=" + u.Hostname(), "PG_PORT=" + u.Port(), "PG_USER=" + u.User.Username(),
		"PG_DB=" + strings.TrimPrefix(u.Path, "/"), "PG_USE_SSL=false", "DB_POOL_SIZE=3",
		"DB_CONNECTION_TIMEOUT=2000", "DB_LOCK_TIMEOUT=10000", "DB_IDLE_TIMEOUT=30000",
		"DB_KEEPALIVES_IDLE=30", "DB_KEEPALIVES_INTERVAL=10", "DB_KEEPALIVES_COUNT=3", "DB_TCP_USER_TIMEOUT_MS=15000",
		"EVICTION_BATCH_SIZE=500",
		"NUM_WORKERS=10", "SIDECAR_POOL_SIZE=50", "STATS_INTERVAL_MS=10000", "QUEEN_UDP_PEERS=queen-b:6633",
		"QUEEN_SYNC_ENABLED=true"}})

	q := e2e.Unique(t, "refenv")
	pushed := s.PushN(t, q, "", 2)
	e2e.WantTxIDs(t, "pop", s.PopOK(t, e2e.PopQueue(q, "batch", "2")), pushed.TxIDs())

	r := s.Get(t, "/api/v1/system/config")
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/system/config: %d %s", r.Status, r.Body)
	}
	var cfg struct {
		Settings []struct{ Name, Value, Default string } `json:"settings"`
	}
	r.JSON(t, &cfg)
	got := map[string]string{}
	for _, st := range cfg.Settings {
		got[st.Name] = st.Value + " | " + st.Default
	}
	for name, want := range map[string]string{
		"DATABASE_URL":           "postgres://" + u.User.Username() + "@" + u.Host + u.Path + "?sslmode=disable | postgres://postgres@localhost:5432/postgres",
		"PG_USE_SSL":             "false | ",
		"DB_CONNECTION_TIMEOUT":  "2000 | 10000",
		"DB_LOCK_TIMEOUT":        "10000 | 0",
		"DB_IDLE_TIMEOUT":        "30000 | 0",
		"DB_KEEPALIVES_IDLE":     "30 | 0",
		"DB_KEEPALIVES_INTERVAL": "10 | 0",
		"DB_KEEPALIVES_COUNT":    "3 | 0",
		"DB_TCP_USER_TIMEOUT_MS": "15000 | 0",
		"EVICTION_BATCH_SIZE":    "500 | 1000",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	for _, name := range ignored {
		if _, shown := got[name]; shown {
			t.Errorf("%s is shown as a setting: it is ignored", name)
		}
	}

	// The warnings are written while the broker opens, before it serves.
	logs := s.Logs()
	for _, name := range ignored {
		if n := strings.Count(logs, `"var":"`+name+`"`); n != 1 {
			t.Errorf("%s: %d log lines, want one:\n%s", name, n, logs)
		}
	}
}
