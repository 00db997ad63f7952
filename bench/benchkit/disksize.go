package benchkit

import (
	"fmt"
	"io/fs"
	"path/filepath"
)

// DiskSize is the size of a file, or of every file under a directory.
func DiskSize(path string) (int64, error) {
	var total int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", path, err)
	}
	return total, nil
}
