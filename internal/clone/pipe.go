package clone

import (
	"context"
	"errors"
	"io"
	"sync"
)

// pipeBlock is how many bytes of COPY data travel from a source connection
// to a target connection at once. pgx's COPY FROM sends one message per
// Read (at most 64 KiB), and COPY TO delivers one row per Write: a plain
// io.Pipe would send one network message per row.
const pipeBlock = 256 << 10

// pipeDepth is how many full blocks wait for the target: enough that the
// source keeps reading while the target parses one block.
const pipeDepth = 2

// errReaderClosed stops a source COPY whose target stopped reading.
var errReaderClosed = errors.New("clone: the target stopped reading")

// blockPipe carries one stream from a source COPY TO (the writer) to a
// target COPY FROM (the reader) in blocks of pipeBlock bytes, with at most
// pipeDepth+2 blocks alive: about 1 MiB per stream.
type blockPipe struct {
	ctx  context.Context
	full chan []byte
	free chan []byte
	done chan struct{} // closed when the reader closes
	once sync.Once

	cur  []byte // the writer's block being filled
	rcur []byte // the reader's block being read
	rbuf []byte // rcur's whole buffer, recycled once read
	err  error  // the writer's final error, set before full is closed
	// written is what the writer wrote: the stream's raw size, read by
	// the writer once it is done.
	written int64
}

func newBlockPipe(ctx context.Context) *blockPipe {
	return &blockPipe{ctx: ctx, full: make(chan []byte, pipeDepth), free: make(chan []byte, pipeDepth+1),
		done: make(chan struct{})}
}

// Write appends to the current block and hands it over when full.
func (p *blockPipe) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if p.cur == nil {
			select {
			case p.cur = <-p.free:
				p.cur = p.cur[:0]
			default:
				p.cur = make([]byte, 0, pipeBlock)
			}
		}
		k := min(len(b), pipeBlock-len(p.cur))
		p.cur = append(p.cur, b[:k]...)
		b = b[k:]
		if len(p.cur) == pipeBlock {
			if err := p.send(); err != nil {
				return 0, err
			}
		}
	}
	p.written += int64(n)
	return n, nil
}

func (p *blockPipe) send() error {
	if len(p.cur) == 0 {
		return nil
	}
	select {
	case p.full <- p.cur:
		p.cur = nil
		return nil
	case <-p.done:
		return errReaderClosed
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

// closeWrite ends the stream: with err nil the reader gets the last block
// then io.EOF; otherwise it gets err.
func (p *blockPipe) closeWrite(err error) {
	if err == nil {
		err = p.send()
	}
	p.err = err
	close(p.full)
}

// Read returns the stream's bytes, then io.EOF, or the writer's error.
// After Close it fails: what was not read is not the stream's end.
func (p *blockPipe) Read(b []byte) (int, error) {
	select {
	case <-p.done:
		return 0, errors.New("clone: read after close")
	default:
	}
	for len(p.rcur) == 0 {
		if p.rbuf != nil {
			select {
			case p.free <- p.rbuf:
			default:
			}
			p.rbuf = nil
		}
		blk, ok := <-p.full
		if !ok {
			if p.err != nil {
				return 0, p.err
			}
			return 0, io.EOF
		}
		p.rcur, p.rbuf = blk, blk
	}
	n := copy(b, p.rcur)
	p.rcur = p.rcur[n:]
	return n, nil
}

// Close stops reading; the writer's next hand-over fails.
func (p *blockPipe) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}
