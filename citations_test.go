package queengo

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// mdRef is a reference to a markdown file: a bare name, a path from
	// the module root, or one from the citing file's folder (./, ../).
	mdRef = regexp.MustCompile(`(?:\.{1,2}/)*(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\.md\b`)
	// webURL is a URL, whose paths are not the repository's.
	webURL = regexp.MustCompile(`[a-z]+://\S+`)
)

// TestCommentsCiteFilesTheRepositoryHas: every markdown file a .go or .sql
// file of the module names (a comment citing the rule it implements, a test
// reading the rule table) is a file a clone has. A path resolves from the
// module root (./ and ../ from the citing file's folder); a bare name must be
// at the root or under docs/. Nested modules, testdata and
// hidden folders are not walked.
func TestCommentsCiteFilesTheRepositoryHas(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir()
	}
	resolves := func(dir, ref string) bool {
		switch {
		case strings.HasPrefix(ref, "./"), strings.HasPrefix(ref, "../"):
			return exists(filepath.Join(dir, ref))
		case strings.Contains(ref, "/"):
			return exists(filepath.Join(root, ref))
		default:
			return exists(filepath.Join(root, ref)) || exists(filepath.Join(root, "docs", ref))
		}
	}
	files, missing := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules" {
				return filepath.SkipDir
			}
			if exists(filepath.Join(path, "go.mod")) {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".sql") {
			return nil
		}
		files++
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(root, path)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if !strings.Contains(line, ".md") {
				continue
			}
			for _, ref := range mdRef.FindAllString(webURL.ReplaceAllString(line, ""), -1) {
				if !resolves(filepath.Dir(path), ref) {
					missing++
					t.Errorf("%s:%d: cites %s, which the repository does not have", filepath.ToSlash(rel), n, ref)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no .go or .sql file found under", root)
	}
	if missing > 0 {
		t.Logf("%d citations of missing files in %d files walked", missing, files)
	}
}
