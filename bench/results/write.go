package results

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Files written by WriteAll into a results directory.
const (
	CSVFile      = "results.csv"
	MarkdownFile = "results.md"
	HTMLFile     = "index.html"
)

// WriteAll writes the CSV, the Markdown and the HTML page into dir,
// creating it if needed. It is called after every dataset, so an
// interrupted run leaves the results so far.
func WriteAll(dir string, m Meta, rows []Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	for _, f := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{CSVFile, func(b *bytes.Buffer) error { return WriteCSV(b, rows) }},
		{MarkdownFile, func(b *bytes.Buffer) error { return WriteMarkdown(b, m, rows) }},
		{HTMLFile, func(b *bytes.Buffer) error { return WriteHTML(b, m, rows) }},
	} {
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}
