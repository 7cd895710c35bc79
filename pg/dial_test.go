package pg

import (
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestConnOptions_TheURLWins: a parameter the URL sets is kept; a zero
// option leaves pgx's dialer and the server's settings alone.
func TestConnOptions_TheURLWins(t *testing.T) {
	t.Parallel()
	pcfg, err := pgxpool.ParseConfig("postgres://u@db:5432/q?connect_timeout=9&lock_timeout=50")
	if err != nil {
		t.Fatal(err)
	}
	pgxDial := reflect.ValueOf(pcfg.ConnConfig.DialFunc).Pointer()
	ConnOptions{ConnectTimeout: time.Second, LockTimeout: time.Second, IdleInTransactionTimeout: time.Second}.apply(pcfg)
	cc := pcfg.ConnConfig
	if cc.ConnectTimeout != 9*time.Second || cc.RuntimeParams["lock_timeout"] != "50" || cc.RuntimeParams["idle_in_transaction_session_timeout"] != "1000" {
		t.Errorf("connect timeout %v, params %v: want the URL's 9s and 50, and 1000 from the options", cc.ConnectTimeout, cc.RuntimeParams)
	}
	// Without keepalive or user-timeout options the dialer stays pgx's;
	// with one it is replaced.
	if reflect.ValueOf(cc.DialFunc).Pointer() != pgxDial {
		t.Error("options without keepalives or a user timeout replaced the dialer")
	}
	ConnOptions{KeepAlive: net.KeepAliveConfig{Count: 3}}.apply(pcfg)
	if reflect.ValueOf(cc.DialFunc).Pointer() == pgxDial {
		t.Error("DB_KEEPALIVES_COUNT left pgx's dialer")
	}
}
