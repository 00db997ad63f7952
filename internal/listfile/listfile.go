// Package listfile reads the files a flag names (--mask-file,
// --subset-file, --filter): opened with an error that names the flag and
// the path once, and, for a file of rules, read a line at a time with
// blank lines and # comments skipped and every error naming the line.
// The three readers said this three times.
package listfile

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Open opens the file path that flag names; its error reads as the user
// typed it: "--mask-file x: no such file or directory", the path once.
func Open(flag, path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return f, nil
}

// Lines calls each with every line of the file path that flag names,
// trimmed, and its number, skipping blank lines and those starting with
// #; an error each returns comes back as "FLAG PATH line N: error". A
// line may be 1 MiB long.
func Lines(flag, path string, each func(n int, line string) error) error {
	f, err := Open(flag, path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := each(n, line); err != nil {
			return fmt.Errorf("%s %s line %d: %w", flag, path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return nil
}
