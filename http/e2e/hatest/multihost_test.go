package hatest

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 41, defect 1: every host of a multi-host DATABASE_URL is tried,
// whatever the first one is. A first host on the loopback with no sslmode in
// the URL used to drop the others (the TLS attempt's fallbacks went with
// them), so a broker whose first host was down never reached the second.
func TestMultiHostURL_EveryHostIsTriedWhateverTheFirst(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "hamulti")
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	dead := "127.0.0.1:" + strconv.Itoa(e2e.FreePort(t))
	u.Host = dead + "," + u.Host
	q := u.Query()
	q.Del("sslmode")
	u.RawQuery = q.Encode()
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: u.String()})
	queue := e2e.Unique(t, "multi")
	res := s.Push(t, e2e.PushItem{Queue: queue, Payload: 1})
	if res[0].Status != "queued" {
		t.Fatalf("push through the second host: %+v", res)
	}
	if r := s.Get(t, "/health"); r.Status != 200 {
		t.Fatalf("/health: %d %s", r.Status, r.Body)
	}
}

// Issue 41, defect 1: a connection that lands on a read-only server (a
// standby) is dropped and the URL's next host tried, also when the URL does
// not say target_session_attrs=read-write: the broker finds the primary
// behind a standby listed first.
func TestMultiHostURL_ReadOnlyServerIsSkipped(t *testing.T) {
	t.Parallel()
	primary := e2e.NewPrimary(t, "")
	standby := e2e.NewStandby(t, primary, "")
	dbURL := "postgres://postgres@" + standby.HostPort() + "," + primary.HostPort() + "/postgres?sslmode=disable"
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: dbURL})
	queue := e2e.Unique(t, "ro")
	res := s.Push(t, e2e.PushItem{Queue: queue, Payload: 1})
	if res[0].Status != "queued" {
		t.Fatalf("push: %+v", res)
	}
	p := s.PopOK(t, e2e.PopQueue(queue, "autoAck", "true"))
	if len(p.Messages) != 1 {
		t.Fatalf("pop: %+v", p)
	}
}
