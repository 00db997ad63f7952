package archive

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// Demux restores in parallel from a pipe. One goroutine reads frames in
// arrival order (a Sequential) and routes each to its stream:
//
//   - a stream somebody has opened gets its frames through a small bounded
//     queue (queueDepth blocks), so a slow loader slows the reader down
//     instead of filling memory;
//   - a stream nobody has opened yet (its loader is busy with another one)
//     has its frames spilled to a file in spillDir, read back first when it
//     is opened.
//
// So memory stays within (open streams × queueDepth × block size) whatever
// the archive's size or the dump's parallelism, and the reader never waits
// for a stream that nobody reads: no deadlock when the restore has fewer
// connections than the dump had. Disk use is at most what was spilled.
type Demux struct {
	seq      *Sequential
	spillDir string
	scan     bool // no stream will be opened: every one is skipped

	mu      sync.Mutex
	streams map[uint32]*demuxStream
	err     error // the reader's final state: nil while running, io.EOF when complete
	done    chan struct{}
}

// queueDepth is how many decompressed blocks wait for an open stream.
const queueDepth = 4

// demuxStream is the routing state of one stream.
type demuxStream struct {
	opened bool
	queue  chan []byte // live frames once opened; closed at the stream's end
	spill  *os.File    // frames that arrived before it was opened
	spillW *bufio.Writer
	// complete is set when the stream's End frame (whose totals the
	// Sequential checked) has been routed: only then may a reader see EOF.
	complete bool
	closedQ  bool
	skipped  bool // nobody will read it: frames are checked and dropped
	info     StreamInfo
}

// NewDemux reads the header from r and starts routing frames. Spill files
// go to spillDir (os.TempDir() if empty) and are removed as they are read.
// An encrypted archive is opened with ids (see Open); its frames are
// spilled decrypted, to files unlinked at once.
func NewDemux(r io.Reader, spillDir string, ids ...age.Identity) (*Demux, error) {
	return newDemux(r, spillDir, false, ids...)
}

// newDemux is NewDemux; with scan, every stream is skipped from the start
// (list and verify read the archive through without opening a stream).
func newDemux(r io.Reader, spillDir string, scan bool, ids ...age.Identity) (*Demux, error) {
	seq, err := NewSequential(r, ids...)
	if err != nil {
		return nil, err
	}
	d := &Demux{seq: seq, spillDir: spillDir, scan: scan, streams: map[uint32]*demuxStream{}, done: make(chan struct{})}
	go d.run()
	return d, nil
}

// Manifest returns the archive's manifest.
func (d *Demux) Manifest() *Manifest { return d.seq.Manifest() }

func (d *Demux) stream(id uint32) *demuxStream {
	s := d.streams[id]
	if s == nil {
		s = &demuxStream{skipped: d.scan}
		d.streams[id] = s
	}
	return s
}

// run is the one reader goroutine.
func (d *Demux) run() {
	defer close(d.done)
	err := d.route()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
	for _, s := range d.streams {
		if s.opened && !s.closedQ && s.queue != nil {
			close(s.queue) // the stream's reader reports d.err
			s.closedQ = true
		}
		// Spill files of streams not opened yet stay until they are, or
		// until Finish: a loader may still come for them.
	}
}

func (d *Demux) route() error {
	for {
		f, err := d.seq.Next()
		if err != nil {
			return err
		}
		d.mu.Lock()
		s := d.stream(f.Stream)
		if f.End {
			s.info = f.Totals
		}
		if s.skipped {
			if f.End {
				s.complete = true
			}
			d.mu.Unlock()
			continue
		}
		if !s.opened {
			err := d.spillFrame(s, f)
			d.mu.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		q := s.queue
		if f.End {
			s.complete, s.closedQ = true, true
		}
		d.mu.Unlock()
		if f.End {
			close(q)
		} else {
			q <- f.Data // blocks while the loader is behind: backpressure
		}
	}
}

// spillFrame appends a frame's data to the stream's spill file; the End
// frame only marks it ended.
func (d *Demux) spillFrame(s *demuxStream, f *Frame) error {
	if f.End {
		s.complete = true
		if s.spillW != nil {
			// The write buffer goes now, not when the stream is opened: a
			// restore far behind its dump may hold thousands of ended
			// streams, which must cost a file each, not memory.
			err := s.spillW.Flush()
			s.spillW = nil
			return err
		}
		return nil
	}
	if s.spill == nil {
		sf, err := tempfile.Create(d.spillDir, tempfile.Spill)
		if err != nil {
			return fmt.Errorf("spill stream %d to disk: %w", f.Stream, err)
		}
		// Unlinked at once: the open file keeps its data, and nothing is
		// left behind however the process ends.
		os.Remove(sf.Name())
		s.spill, s.spillW = sf, bufio.NewWriterSize(sf, 256<<10)
	}
	if _, err := s.spillW.Write(f.Data); err != nil {
		return fmt.Errorf("spill stream %d to disk: %w", f.Stream, err)
	}
	return nil
}

// Order is Interleaved: streams arrive as the pipe delivers them.
func (d *Demux) Order() Order { return Interleaved }

// OpenStream returns the content of stream id as it arrives: what was
// spilled first, then live frames. It returns an error instead of io.EOF if
// the archive turns out to be incomplete or damaged before the stream's
// end; the whole archive is only known sound after Finish returns nil.
// Each stream can be opened once, and not after Skip.
func (d *Demux) OpenStream(id uint32) io.ReadCloser {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stream(id)
	if s.opened {
		return errReader{fmt.Errorf("archive: stream %d opened twice", id)}
	}
	if s.skipped {
		return errReader{fmt.Errorf("archive: stream %d opened after it was skipped", id)}
	}
	s.opened = true
	r := &demuxReader{d: d, s: s, id: id}
	if s.spill != nil {
		if s.spillW != nil {
			if err := s.spillW.Flush(); err != nil {
				return errReader{fmt.Errorf("spill stream %d: %w", id, err)}
			}
		}
		if _, err := s.spill.Seek(0, io.SeekStart); err != nil {
			return errReader{fmt.Errorf("spill stream %d: %w", id, err)}
		}
		r.spill = bufio.NewReaderSize(s.spill, 256<<10)
	}
	switch {
	case s.complete:
		// Everything is in the spill file (or the stream is empty).
	case d.err != nil:
		r.failed = true
	default:
		s.queue = make(chan []byte, queueDepth)
		r.queue = s.queue
	}
	return r
}

// Skip says that streams ids will never be opened (a partial restore does
// not load them): their frames are still read and checked, since the
// archive is only sound if all of it is, but dropped instead of spilled,
// and what was spilled already is freed.
func (d *Demux) Skip(ids ...uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		s := d.stream(id)
		if s.opened {
			continue
		}
		s.skipped = true
		if s.spill != nil {
			s.spill.Close()
			s.spill, s.spillW = nil, nil
		}
	}
}

// Stream returns a stream's totals once its End frame has been read.
func (d *Demux) Stream(id uint32) (*StreamInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.streams[id]
	if s == nil || !s.complete {
		return nil, false
	}
	info := s.info
	return &info, true
}

// Streams lists the totals of every stream whose End frame has been
// read, in id order: all of them once Finish has returned nil.
func (d *Demux) Streams() []StreamInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]StreamInfo, 0, len(d.streams))
	for _, s := range d.streams {
		if s.complete {
			out = append(out, s.info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Finish waits for the reader to reach the end of the archive and returns
// nil only if the trailer was read and everything checked out. Streams
// nobody opened are drained to spill files meanwhile, so Finish must be
// called after every wanted stream has been opened.
func (d *Demux) Finish() error {
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.streams {
		if s.spill != nil && !s.opened {
			s.spill.Close()
			os.Remove(s.spill.Name())
			s.spill = nil
		}
	}
	if d.err == io.EOF {
		return nil
	}
	return d.err
}

// readerErr is the error a stream's reader reports when the stream was cut
// short: the archive reader's own error, or, if the archive was complete,
// that it has no such stream.
func (d *Demux) readerErr(id uint32) error {
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == io.EOF || d.err == nil {
		return fmt.Errorf("archive: no stream %d in the archive", id)
	}
	return d.err
}

// demuxReader reads one stream: spill file first, then the live queue.
type demuxReader struct {
	d      *Demux
	id     uint32
	s      *demuxStream
	spill  *bufio.Reader
	queue  chan []byte
	cur    []byte
	failed bool
	closed bool
}

func (r *demuxReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, errors.New("archive: read after close")
	}
	if r.spill != nil {
		n, err := r.spill.Read(p)
		if err == io.EOF {
			r.dropSpill()
			err = nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
	for len(r.cur) == 0 {
		if r.failed {
			return 0, r.d.readerErr(r.id)
		}
		if r.queue == nil {
			return 0, io.EOF // ended before it was opened: all of it was spilled
		}
		b, ok := <-r.queue
		if !ok {
			r.queue = nil
			r.d.mu.Lock()
			r.failed = !r.s.complete
			r.d.mu.Unlock()
			continue
		}
		r.cur = b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *demuxReader) dropSpill() {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	if r.s.spill != nil {
		r.s.spill.Close()
		os.Remove(r.s.spill.Name())
		r.s.spill = nil
	}
	r.spill = nil
}

// Close stops reading. A stream closed before its end keeps being drained
// (its frames are discarded) so the reader goroutine never blocks on it.
func (r *demuxReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.spill != nil {
		r.dropSpill()
	}
	if q := r.queue; q != nil {
		go func() {
			for range q {
			}
		}()
	}
	return nil
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
func (e errReader) Close() error             { return nil }
