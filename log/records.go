package log

import "fmt"

// RecordInfo describes one stored record, for tools.
type RecordInfo struct {
	// Segment is the segment file's base name; Position the record's byte
	// position in it and Bytes its encoded size.
	Segment  string
	Position int64
	Bytes    int
	// Version is the record's layout version (0, 1, 2 with a producer
	// block, or 3 with a state section).
	Version    uint8
	Kind       Kind
	Offset     uint64
	Generation uint64
	TimeMicros uint64
	Publisher  string
	// Producer is the record's producer block (version 2), else nil.
	Producer *Producer
	// StateBytes is the length of the record's state section (version 3,
	// an atomic commit), 0 without one.
	StateBytes int
	// PayloadBytes is the payload's length.
	PayloadBytes int
	// Payload is the payload itself, valid only during the call that
	// receives it (it aliases the scan's read buffer): a tool that keeps
	// it copies it.
	Payload []byte
}

// ScanRecords calls fn for every record of the log in dir that Open would
// keep, oldest first, without writing anything: it stops where recovery
// stops (the first damage, a torn tail, a pending truncation's cut). It
// returns the recovery report; an error fn returns stops the scan and is
// returned.
func ScanRecords(dir string, fn func(RecordInfo) error) (*Report, error) {
	rec, err := recoverDir(OSFS(), dir, DefaultIndexIntervalBytes)
	if err != nil {
		return nil, err
	}
	defer rec.closeAll()
	for _, sc := range rec.scans {
		if err := scanInfos(sc.seg, fn); err != nil {
			return rec.report, err
		}
	}
	return rec.report, nil
}

// scanInfos reads the records recovery verified in one segment.
func scanInfos(s *segment, fn func(RecordInfo) error) error {
	r := newRecordReader(s.f, s.size, readChunk)
	for pos := int64(0); pos < s.size; {
		v, n, err := r.at(pos)
		if err != nil {
			// Recovery verified these bytes: something changed them since.
			return fmt.Errorf("log: scan %s at %d: %w", s.name(), pos, err)
		}
		info := RecordInfo{Segment: s.name(), Position: pos, Bytes: n, Version: v.version, Kind: v.kind,
			Offset: v.offset, Generation: v.generation, TimeMicros: v.time, Publisher: string(v.publisher),
			PayloadBytes: len(v.payload), Payload: v.payload}
		if v.version == RecordVersionProducer {
			pr := v.producer
			info.Producer = &pr
		}
		info.StateBytes = len(v.state)
		if err := fn(info); err != nil {
			return err
		}
		pos += int64(n)
	}
	return nil
}
