package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// ruleRow is a row of the table in docs/rules.md; its first cell is the id.
	ruleRow = regexp.MustCompile(`^\|\s*([^|]+?)\s*\|`)
	// testID is a test named after a rule id: TestQ5_…, TestD12_…
	testID = regexp.MustCompile(`^func (Test([A-Z]{1,2})([0-9]+[a-z]?)_\w*)`)
	// commentID is a rule id in a comment: Q-5, U-10, D12, Contract B.
	commentID = regexp.MustCompile(`\b([A-Z]{1,2}-[0-9]+[a-z]?|D[0-9]+|Contract [A-Z])\b`)
)

// TestRuleIDsAreDefined: every rule id a test name or a comment of the
// repository uses has its line in docs/rules.md, and no id has two.
func TestRuleIDsAreDefined(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for line := range strings.Lines(readFile(t, filepath.Join(root, "docs", "rules.md"))) {
		m := ruleRow.FindStringSubmatch(line)
		if m == nil || m[1] == "id" || strings.HasPrefix(m[1], "---") {
			continue
		}
		if defined[m[1]] {
			t.Errorf("docs/rules.md defines %s twice", m[1])
		}
		defined[m[1]] = true
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		comment := "//"
		switch filepath.Ext(name) {
		case ".go":
		case ".sql":
			comment = "--"
		default:
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		n := 0
		for line := range strings.Lines(readFile(t, path)) {
			n++
			if m := testID.FindStringSubmatch(line); m != nil && strings.HasSuffix(name, "_test.go") {
				// A test name drops the hyphen: TestQ5_ is Q-5.
				if !defined[m[2]+m[3]] && !defined[m[2]+"-"+m[3]] {
					t.Errorf("%s:%d: %s uses rule id %s%s, which docs/rules.md does not define", rel, n, m[1], m[2], m[3])
				}
			}
			if _, text, ok := strings.Cut(line, comment); ok {
				for _, id := range commentID.FindAllString(text, -1) {
					if !defined[id] {
						t.Errorf("%s:%d: comment uses rule id %s, which docs/rules.md does not define", rel, n, id)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
