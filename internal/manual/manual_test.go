package manual

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestWrite writes the pages and completions of a small command tree: a
// page per visible command named after its path, its help text in it,
// none for a hidden command, and the three completion scripts.
func TestWrite(t *testing.T) {
	t.Parallel()
	root := &cobra.Command{Use: "pgsprint", Short: "root"}
	dump := &cobra.Command{Use: "dump", Short: "Dump a database", Long: "Dump it whole, in parallel.", Run: func(*cobra.Command, []string) {}}
	dump.Flags().IntP("jobs", "j", 2, "parallel workers")
	hidden := &cobra.Command{Use: "gen-docs", Hidden: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(dump, hidden)
	dir := t.TempDir()
	date := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	if err := Write(root, dir, "1.2.3", date); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, ManDir, "pgsprint-dump.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`.TH "PGSPRINT-DUMP" "1" "Jan 2026" "pgsprint 1.2.3" "pgsprint manual"`, "Dump it whole, in parallel.", "parallel workers"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("pgsprint-dump.1 lacks %q:\n%s", want, page)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ManDir, "pgsprint.1")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ManDir, "pgsprint-gen-docs.1")); err == nil {
		t.Error("a hidden command has a page")
	}
	for file, want := range map[string]string{Bash: "__start_pgsprint", Zsh: "#compdef pgsprint", Fish: "complete -c pgsprint"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v, or lacks %q", file, err, want)
		}
	}
}
