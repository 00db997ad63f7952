package codec

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec      string
		wantName  string
		wantLevel int
		wantAuto  bool
		wantErr   string
	}{
		{spec: "zstd", wantName: "zstd", wantLevel: 3},
		{spec: "zstd:auto", wantName: "zstd", wantLevel: 0, wantAuto: true},
		{spec: " ZSTD:level=auto", wantName: "zstd", wantLevel: 0, wantAuto: true},
		{spec: "zstd:9", wantName: "zstd", wantLevel: 9},
		{spec: "zstd:level=19", wantName: "zstd", wantLevel: 19},
		{spec: " ZSTD:1 ", wantName: "zstd", wantLevel: 1},
		{spec: "lz4", wantName: "lz4", wantLevel: 1},
		{spec: "lz4:1", wantName: "lz4", wantLevel: 1},
		{spec: "lz4:9", wantName: "lz4", wantLevel: 9},
		{spec: "gzip", wantName: "gzip", wantLevel: 6},
		{spec: "gzip:6", wantName: "gzip", wantLevel: 6},
		{spec: "gzip:level=1", wantName: "gzip", wantLevel: 1},
		{spec: "none", wantName: "none", wantLevel: 0},
		{spec: "0", wantName: "none", wantLevel: 0},
		{spec: "1", wantName: "gzip", wantLevel: 1},
		{spec: "9", wantName: "gzip", wantLevel: 9},

		{spec: "", wantErr: "empty compression spec"},
		{spec: "10", wantErr: "out of range"},
		{spec: "brotli", wantErr: `unknown compression method "brotli" (want zstd, lz4, gzip or none)`},
		{spec: "brotli:3", wantErr: `unknown compression method "brotli"`},
		{spec: "zstd:", wantErr: "invalid compression level"},
		{spec: "zstd:abc", wantErr: `invalid compression level "abc"`},
		{spec: "zstd:-1", wantErr: "invalid compression level"},
		{spec: "zstd:23", wantErr: "out of range for zstd"},
		{spec: "zstd:0", wantErr: "level 0 is not valid"},
		{spec: "zstd:long", wantErr: "invalid compression level"},
		{spec: "lz4:auto", wantErr: `invalid compression level "auto"`},
		{spec: "zstd:workers=4", wantErr: `unsupported compression option "workers"`},
		{spec: "gzip:10", wantErr: "out of range for gzip"},
		{spec: "lz4:12", wantErr: "out of range for lz4"},
		{spec: "none:0", wantErr: "takes no level"},
		{spec: "-1", wantErr: "unknown compression method"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			c, err := Parse(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want containing %q", tt.spec, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			if _, auto := c.(*ZstdAuto); auto != tt.wantAuto {
				t.Errorf("Parse(%q) is ZstdAuto: %v, want %v", tt.spec, auto, tt.wantAuto)
			}
			if c.Name() != tt.wantName || c.Level() != tt.wantLevel {
				t.Errorf("Parse(%q) = %s level %d, want %s level %d", tt.spec, c.Name(), c.Level(), tt.wantName, tt.wantLevel)
			}
		})
	}
}
