package progress

import (
	"bytes"
	"io"
)

// flushEvery is how many bytes a Counter gathers before telling the
// Reporter: often enough for a smooth bar, rarely enough to cost nothing.
const flushEvery = 256 << 10

// Counter counts the bytes and COPY text rows (newlines: embedded ones are
// escaped as \n) that pass through it and reports them in batches. It
// wraps a COPY stream in either direction.
type Counter struct {
	rep          Reporter
	w            io.Writer
	r            io.Reader
	bytes, rows  int64 // not yet reported
	Total, Lines int64 // since the start
	// Binary streams (large objects) have no rows to count.
	Binary bool
}

// NewWriter counts what is written to w.
func NewWriter(w io.Writer, rep Reporter) *Counter { return &Counter{w: w, rep: rep} }

// NewReader counts what is read from r.
func NewReader(r io.Reader, rep Reporter) *Counter { return &Counter{r: r, rep: rep} }

// Write implements io.Writer.
func (c *Counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.count(p[:n])
	return n, err
}

// Read implements io.Reader.
func (c *Counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.count(p[:n])
	return n, err
}

func (c *Counter) count(p []byte) {
	n, rows := int64(len(p)), int64(0)
	if !c.Binary {
		rows = int64(bytes.Count(p, []byte{'\n'}))
	}
	c.bytes += n
	c.rows += rows
	c.Total += n
	c.Lines += rows
	if c.bytes >= flushEvery {
		c.Flush()
	}
}

// Flush reports what was counted since the last report.
func (c *Counter) Flush() {
	if c.bytes > 0 || c.rows > 0 {
		c.rep.Add(c.bytes, c.rows)
		c.bytes, c.rows = 0, 0
	}
}
