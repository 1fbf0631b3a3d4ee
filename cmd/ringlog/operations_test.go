package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// operationsDoc is the operators' guide, whose "Log lines" section
// explains every message the broker logs at WARN and above.
const operationsDoc = "../../docs/operations.md"

// logLine is one call that logs at WARN or above.
type logLine struct {
	level, msg, at string
}

// logSkipped are the trees whose logs are not the broker's: programs
// that embed the engine, and test tooling.
var logSkipped = map[string]bool{
	"examples": true, "testdata": true, "internal/testkit": true, "internal/kafkaref": true, "internal/difftest": true,
	"javaclient": true, ".git": true,
}

// warnLogLines finds every slog call at WARN or above in the module's
// non-test Go files: x.Warn(msg, ...), x.Error(msg, ...), their Context
// forms, and x.Log(ctx, level, msg, ...) with a level that is not
// slog.LevelDebug or slog.LevelInfo (a variable level counts: it may be
// WARN). The message must be a string constant, or constants joined
// with variables, rendered with "…" for each variable part; a call whose
// message is not (an adapter passing on raft's or gnet's) is left out.
func warnLogLines(t *testing.T, root string) []logLine {
	t.Helper()
	var out []logLine
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if logSkipped[rel] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			level, msgArg := "", -1
			switch sel.Sel.Name {
			case "Warn":
				level, msgArg = "WARN", 0
			case "Error":
				level, msgArg = "ERROR", 0
			case "WarnContext":
				level, msgArg = "WARN", 1
			case "ErrorContext":
				level, msgArg = "ERROR", 1
			case "Log", "LogAttrs":
				if len(call.Args) < 3 {
					return true
				}
				switch lv := types(call.Args[1]); lv {
				case "slog.LevelDebug", "slog.LevelInfo":
					return true
				case "slog.LevelWarn":
					level = "WARN"
				case "slog.LevelError":
					level = "ERROR"
				default:
					level = "WARN" // a variable level: WARN at times
				}
				msgArg = 2
			default:
				return true
			}
			if len(call.Args) <= msgArg {
				return true
			}
			msg, ok := constMessage(call.Args[msgArg])
			if !ok {
				return true
			}
			pos := fset.Position(call.Pos())
			at, _ := filepath.Rel(root, pos.Filename)
			out = append(out, logLine{level: level, msg: msg, at: filepath.ToSlash(at) + ":" + strconv.Itoa(pos.Line)})
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// types renders a selector such as slog.LevelWarn; anything else is "".
func types(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok {
			return x.Name + "." + sel.Sel.Name
		}
	}
	return ""
}

// constMessage renders a log message: a string literal, or literals
// joined by + with other operands, each of which becomes "…". ok is false
// when no part is a literal.
func constMessage(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, lok := constMessage(e.X)
		r, rok := constMessage(e.Y)
		if !lok && !rok {
			return "", false
		}
		if !lok {
			l = "…"
		}
		if !rok {
			r = "…"
		}
		return l + r, true
	case *ast.ParenExpr:
		return constMessage(e.X)
	}
	return "", false
}

// TestOperationsExplainsEveryWarning: every message the broker logs at
// WARN or ERROR is explained in docs/operations.md, quoted in backquotes
// as it appears in the log (msg="..."), so that an operator who finds one
// finds what it means and what to do.
func TestOperationsExplainsEveryWarning(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := warnLogLines(t, "../..")
	if len(lines) < 50 {
		t.Fatalf("only %d WARN/ERROR log calls found: the scan lost them", len(lines))
	}
	var missing []string
	for _, l := range lines {
		if !strings.Contains(string(doc), "`"+l.msg+"`") {
			missing = append(missing, l.level+" "+strconv.Quote(l.msg)+" ("+l.at+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d log messages at WARN or above are not explained in docs/operations.md (quote each in backquotes):\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
}

// TestAlertRunbooks: every alert rule has a severity, a summary and a
// runbook that is a section of docs/operations.md (its GitHub anchor), and
// the guide's links to its own sections resolve.
func TestAlertRunbooks(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "#") {
			anchors[headingAnchor(strings.TrimLeft(line, "# "))] = true
		}
	}
	// The guide's own links to its sections resolve too.
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(string(doc), -1) {
		if !anchors[m[1]] {
			t.Errorf("docs/operations.md links to #%s, which is no section of it", m[1])
		}
	}
	for _, r := range loadAlertRules(t, alertsFile) {
		if r.Alert == "" {
			continue
		}
		if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
			t.Errorf("%s: no severity label or summary annotation", r.Alert)
		}
		rb := r.Annotations["runbook"]
		anchor, ok := strings.CutPrefix(rb, "docs/operations.md#")
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook %q is not a section of docs/operations.md", r.Alert, rb)
		}
	}
}

// headingAnchor is GitHub's anchor of a Markdown heading: lowercased,
// punctuation dropped, spaces made hyphens.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
