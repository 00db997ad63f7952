//go:build !linux

package archive

import (
	"errors"
	"os"
)

// memFile is memfd_create's, which only Linux has: elsewhere the caller
// uses a temporary file.
func memFile(string) (*os.File, string, error) {
	return nil, "", errors.New("no memfd on this system")
}
