package filebuffer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// bundle is one test's log and its directory.
type bundle struct {
	dir string
	log *Log
}

func setup(t *testing.T, opts Options) *bundle {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &bundle{dir: dir, log: l}
}

// reopen closes the log and opens its directory again, as a restart does.
func (b *bundle) reopen(t *testing.T, opts Options) {
	t.Helper()
	b.log.Close()
	l, err := Open(b.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b.log = l
}

// readAll returns every record of the ended files, oldest first.
func (b *bundle) readAll(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range b.log.Files() {
		recs, err := b.log.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != f.Records {
			t.Fatalf("file %d: read %d records, listed %d", f.Seq, len(recs), f.Records)
		}
		for _, r := range recs {
			out = append(out, string(r))
		}
	}
	return out
}

func recs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// Records come back in append order across rotations, and only from ended
// files: the current one is listed after Seal.
func TestLog_RecordsReadBackInOrderAcrossRotations(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{EventsPerFile: 3})
	var want []string
	for i := range 10 {
		r := fmt.Sprintf("rec-%d", i)
		want = append(want, r)
		if err := b.log.Append(recs(r)); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(b.log.Files()); got != 3 {
		t.Fatalf("%d ended files before Seal, want 3 (the fourth is current)", got)
	}
	b.log.Seal()
	got := b.readAll(t)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if st := b.log.Stats(); st.Records != 10 || st.Files != 4 || !st.Healthy {
		t.Fatalf("stats %+v, want 10 records in 4 files, healthy", st)
	}
}

// A file rotates by bytes too, but never holds fewer than one record.
func TestLog_RotatesByBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{FileBytes: 40})
	big := string(bytes.Repeat([]byte("x"), 100))
	if err := b.log.Append(recs("a", big, "b", "c")); err != nil {
		t.Fatal(err)
	}
	b.log.Seal()
	files := b.log.Files()
	var per []int
	for _, f := range files {
		per = append(per, f.Records)
	}
	if fmt.Sprint(per) != "[1 1 2]" {
		t.Fatalf("records per file %v, want [1 1 2]", per)
	}
}

// Removed files leave the log; the others stay, and a reopen finds exactly
// the records not removed.
func TestLog_RemoveAndReopen(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{EventsPerFile: 2})
	if err := b.log.Append(recs("a", "b", "c", "d", "e")); err != nil {
		t.Fatal(err)
	}
	b.log.Seal()
	files := b.log.Files()
	if err := b.log.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	b.reopen(t, Options{EventsPerFile: 2})
	if got := fmt.Sprint(b.readAll(t)); got != "[c d e]" {
		t.Fatalf("after reopen %s, want [c d e]", got)
	}
	if err := b.log.Append(recs("f")); err != nil {
		t.Fatal(err)
	}
	b.log.Seal()
	if got := fmt.Sprint(b.readAll(t)); got != "[c d e f]" {
		t.Fatalf("after a new append %s, want [c d e f]", got)
	}
}

// The current file cannot be removed.
func TestLog_RemoveRefusesTheCurrentFile(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	if err := b.log.Append(recs("a")); err != nil {
		t.Fatal(err)
	}
	b.log.mu.Lock()
	cur := b.log.files[len(b.log.files)-1]
	b.log.mu.Unlock()
	if err := b.log.Remove(cur); err == nil {
		t.Fatal("removed the file being written")
	}
}

// A torn last record (a crash in the middle of its write) and garbage after
// it are cut at Open; the records before it stay.
func TestLog_TornTailIsCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tail func(last []byte) []byte // what is left of the last record
	}{
		{"half a header", func(last []byte) []byte { return last[:3] }},
		{"header without payload", func(last []byte) []byte { return last[:headerSize+1] }},
		{"payload bit flipped", func(last []byte) []byte {
			c := bytes.Clone(last)
			c[len(c)-1] ^= 1
			return c
		}},
		{"zeroes", func(last []byte) []byte { return make([]byte, len(last)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{})
			if err := b.log.Append(recs("one", "two")); err != nil {
				t.Fatal(err)
			}
			b.log.Seal()
			f := b.log.Files()[0]
			p := b.log.path(f.Seq)
			last := Encode(nil, []byte("three-torn"))
			fh, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.Write(tc.tail(last)); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			b.reopen(t, Options{})
			if got := fmt.Sprint(b.readAll(t)); got != "[one two]" {
				t.Fatalf("records %s, want [one two]", got)
			}
			st := b.log.Stats()
			if st.Cut != int64(len(tc.tail(last))) || st.Bytes != f.Bytes {
				t.Fatalf("stats %+v, want %d bytes cut and %d kept", st, len(tc.tail(last)), f.Bytes)
			}
			if fi, err := os.Stat(p); err != nil || fi.Size() != f.Bytes {
				t.Fatalf("file size after the cut: %v %v, want %d", fi, err, f.Bytes)
			}
		})
	}
}

// A file whose only record is torn is removed at Open; files that are not
// the log's are left alone.
func TestLog_EmptyFilesRemovedForeignFilesKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	torn := filepath.Join(dir, fmt.Sprintf("%020d%s", 7, suffix))
	if err := os.WriteFile(torn, []byte{1, 2, 3}, 0o640); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(foreign, []byte("keep"), 0o640); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := os.Stat(torn); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the torn-only file is still there: %v", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatalf("a foreign file was touched: %v", err)
	}
	if err := l.Append(recs("x")); err != nil {
		t.Fatal(err)
	}
	l.Seal()
	if fs := l.Files(); len(fs) != 1 || fs[0].Seq != 8 {
		t.Fatalf("files %+v, want one numbered after the removed one (8)", fs)
	}
}

// Past MaxBytes an Append fails with ErrFull and writes nothing; after a
// Remove there is room again.
func TestLog_FullRefusesWholeAppend(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{MaxBytes: 100, EventsPerFile: 1})
	rec := string(bytes.Repeat([]byte("y"), 32)) // 40 bytes with its header
	if err := b.log.Append(recs(rec, rec)); err != nil {
		t.Fatal(err)
	}
	if err := b.log.Append(recs(rec)); !errors.Is(err, ErrFull) {
		t.Fatalf("append past MaxBytes: %v, want ErrFull", err)
	}
	if st := b.log.Stats(); st.Records != 2 || st.Bytes != 80 {
		t.Fatalf("stats %+v after a refused append, want 2 records, 80 bytes", st)
	}
	b.log.Seal()
	if err := b.log.Remove(b.log.Files()[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.log.Append(recs(rec)); err != nil {
		t.Fatalf("append after a remove made room: %v", err)
	}
}

// Concurrent appends all land, each append's records together and in its
// order, and share fsyncs.
func TestLog_ConcurrentAppendsKeepTheirRecordsTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{EventsPerFile: 50})
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := b.log.Append(recs(fmt.Sprintf("%d/%d/a", w, i), fmt.Sprintf("%d/%d/b", w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.log.Seal()
	got := b.readAll(t)
	if len(got) != writers*each*2 {
		t.Fatalf("%d records, want %d", len(got), writers*each*2)
	}
	next := map[string]int{}
	for i := 0; i < len(got); i += 2 {
		var w, n int
		var part string
		if _, err := fmt.Sscanf(got[i], "%d/%d/%s", &w, &n, &part); err != nil || part != "a" {
			t.Fatalf("record %d is %q, want an a", i, got[i])
		}
		if got[i+1] != fmt.Sprintf("%d/%d/b", w, n) {
			t.Fatalf("record %d is %q, want %d/%d/b right after its a", i+1, got[i+1], w, n)
		}
		if key := fmt.Sprint(w); next[key] != n {
			t.Fatalf("writer %d: append %d before %d", w, n, next[key])
		} else {
			next[key]++
		}
	}
}

// After Close every Append fails with ErrClosed.
func TestLog_AppendAfterClose(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	b.log.Close()
	if err := b.log.Append(recs("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}
}

// Decode never reads past its input, never panics, and reads back exactly
// what Encode wrote in front of any garbage.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte("payload"), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte(`{"q":"x"}`), Encode(nil, []byte("next"))[:5])
	f.Fuzz(func(t *testing.T, payload, garbage []byte) {
		recs, good := Decode(garbage)
		if good > len(garbage) {
			t.Fatalf("good %d past the input's %d bytes", good, len(garbage))
		}
		n := 0
		for _, r := range recs {
			n += headerSize + len(r)
		}
		if n != good {
			t.Fatalf("records take %d bytes, good says %d", n, good)
		}
		data := append(Encode(nil, payload), garbage...)
		recs, good = Decode(data)
		if len(recs) == 0 || !bytes.Equal(recs[0], payload) || good < headerSize+len(payload) {
			t.Fatalf("the encoded record did not come back first: %d records, good %d", len(recs), good)
		}
	})
}

// One process at a time holds a directory: a second Open fails with
// ErrInUse until the first log is closed.
func TestLog_DirectoryHeldByOneLogAtATime(t *testing.T) {
	b := setup(t, Options{})
	if _, err := Open(b.dir, Options{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: %v, want ErrInUse", err)
	}
	b.reopen(t, Options{})
	if err := b.log.Append([][]byte{[]byte("after")}); err != nil {
		t.Fatal(err)
	}
}

// A write that fails part way (here EFBIG from RLIMIT_FSIZE, as a full disk's
// ENOSPC would) answers the batch's appends with the error and leaves none
// of its records to be replayed, before or after a restart: a pusher told
// its push failed may send it again. Not parallel: the file size limit is
// the process's.
func TestLog_AFailedWriteLeavesNothingOfItsBatch(t *testing.T) {
	signal.Ignore(syscall.SIGXFSZ)
	b := setup(t, Options{})
	if err := b.log.Append([][]byte{[]byte("acked")}); err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	// Room for the first record and one more of the batch, not both.
	size := int64(0)
	for _, f := range b.log.Files() {
		size += f.Bytes
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(size) + 150, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	err := b.log.Append([][]byte{[]byte("A" + strings.Repeat("a", 99)), []byte("B" + strings.Repeat("b", 99))})
	if lerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); lerr != nil {
		t.Fatal(lerr)
	}
	if err == nil {
		t.Fatal("the append did not fail")
	}
	records := func() []string {
		var got []string
		for _, f := range b.log.Files() {
			recs, err := b.log.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				got = append(got, string(r))
			}
		}
		return got
	}
	if got := records(); len(got) != 1 || got[0] != "acked" {
		t.Fatalf("records left after the failed write: %q, want only the acknowledged one", got)
	}
	b.reopen(t, Options{})
	if got := records(); len(got) != 1 || got[0] != "acked" {
		t.Fatalf("records after a restart: %q, want only the acknowledged one", got)
	}
}
