package archive

import "slices"

// streamEntry is a stream's footer entry as a Reader keeps it. A restore
// of 100,000 small tables holds 100,000 of them for its whole run, beside
// 200,000 frames: a map from stream id to position, a slice of frame
// indexes per stream and the footer's entries as decoded were 17 MB there.
// Without those, and with what buildIndex has proven derivable left out
// (a stream's frame count, each frame's stream, seq, kind and codec), it
// is 7 MB. Streams are found by binary search, their ids being sorted.
type streamEntry struct {
	rows, raw, stored int64
	id, crc           uint32
	first             uint32 // index in Reader.frames of its first frame
	pack              uint32 // a packed stream's: 1 + its pack's index in Reader.packLocs
	kind              Kind
}

// frameLoc is where a frame is and its lengths. The rest of its footer
// entry follows from its place: its stream is the one whose frames it is
// among, its seq its position there, its kind End if it is the last,
// else its stream's; its codec none if it is an End frame or stored as
// long as its raw bytes, else the archive's (frameState.check allows no
// other).
type frameLoc struct {
	off         int64
	raw, stored uint32
}

// find is the position in ar.streams of stream id.
func (ar *Reader) find(id uint32) (int, bool) {
	return slices.BinarySearchFunc(ar.streams, id, func(s streamEntry, id uint32) int {
		switch {
		case s.id < id:
			return -1
		case s.id > id:
			return 1
		}
		return 0
	})
}

// frameRange is the frames of the stream at position i, End last.
func (ar *Reader) frameRange(i int) []frameLoc {
	end := uint32(len(ar.frames))
	if i+1 < len(ar.streams) {
		end = ar.streams[i+1].first
	}
	return ar.frames[ar.streams[i].first:end]
}

// info is the stream at position i as StreamInfo describes it.
func (ar *Reader) info(i int) StreamInfo {
	s := &ar.streams[i]
	frames := 0
	if s.pack == 0 {
		frames = len(ar.frameRange(i)) - 1
	}
	return StreamInfo{ID: s.id, Kind: s.kind, Rows: s.rows, RawBytes: s.raw, StoredBytes: s.stored,
		Frames: frames, CRC: s.crc}
}

// entry is the footer entry of frame seq of the stream at position i.
func (ar *Reader) entry(i int, seq uint32) frameEntry {
	frames := ar.frameRange(i)
	f, s := frames[seq], &ar.streams[i]
	e := frameEntry{off: f.off, stream: s.id, seq: seq, raw: f.raw, stored: f.stored, kind: s.kind, codec: codecNone}
	if int(seq) == len(frames)-1 {
		e.kind = KindEnd
	} else if f.stored != f.raw {
		e.codec = ar.packed
	}
	return e
}
