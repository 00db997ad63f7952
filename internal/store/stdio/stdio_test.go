package stdio_test

import (
	"bytes"
	"testing"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/stdio"
	"github.com/pgsprint/pgsprint/internal/store/storetest"
)

// TestConformance joins standard output to standard input, as a pipe
// between a dump and a restore does.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Medium{
		New: func(t *testing.T) store.Backend {
			var pipe bytes.Buffer
			return stdio.New(&pipe, &pipe)
		},
	})
}
