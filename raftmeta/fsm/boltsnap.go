package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
)

// The bbolt snapshot format is logical, not a copy of pages, so two
// databases that hold the same buckets, keys, values and bucket sequences
// produce byte-identical snapshots whatever their page layout:
//
//	magic "FXBS1\n"
//	records: 'B' name seq (begin bucket) | 'K' key value | 'E' (end bucket)
//	'Z' then CRC-32C (Castagnoli) of every preceding byte, big-endian
//
// Names, keys and values are a uvarint length and the bytes; seq is a
// uvarint. Buckets and keys appear in bbolt's (byte-sorted) order.
const boltSnapMagic = "FXBS1\n"

// Limits applied when reading a snapshot, so a corrupt length never
// allocates unbounded memory.
const (
	maxSnapKey   = bolt.MaxKeySize
	maxSnapValue = 64 << 20
	maxSnapDepth = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadSnapshot is returned when a snapshot stream is malformed or fails
// its checksum.
var ErrBadSnapshot = errors.New("raftmeta: bad snapshot")

// WriteBoltSnapshot writes every bucket visible in tx to w in the logical
// snapshot format.
func WriteBoltSnapshot(tx *bolt.Tx, w io.Writer) error {
	bw := bufio.NewWriter(w)
	crc := crc32.New(castagnoli)
	out := io.MultiWriter(bw, crc)
	if _, err := io.WriteString(out, boltSnapMagic); err != nil {
		return err
	}
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		return writeBucket(out, name, b)
	})
	if err != nil {
		return err
	}
	if _, err := out.Write([]byte{'Z'}); err != nil {
		return err
	}
	if _, err := bw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return err
	}
	return bw.Flush()
}

func writeBucket(w io.Writer, name []byte, b *bolt.Bucket) error {
	rec := append([]byte{'B'}, appendBytes(nil, name)...)
	rec = binary.AppendUvarint(rec, b.Sequence())
	if _, err := w.Write(rec); err != nil {
		return err
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if err := writeBucket(w, k, b.Bucket(k)); err != nil {
				return err
			}
			continue
		}
		rec = append(rec[:0], 'K')
		rec = appendBytes(rec, k)
		rec = appendBytes(rec, v)
		if _, err := w.Write(rec); err != nil {
			return err
		}
	}
	_, err := w.Write([]byte{'E'})
	return err
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// RestoreBoltSnapshot replaces every bucket in tx with the snapshot read
// from r. On any error the caller must roll tx back (returning the error
// from a bolt Update function does that).
func RestoreBoltSnapshot(tx *bolt.Tx, r io.Reader) error {
	var names [][]byte
	if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		names = append(names, bytes.Clone(name))
		return nil
	}); err != nil {
		return err
	}
	for _, n := range names {
		if err := tx.DeleteBucket(n); err != nil {
			return err
		}
	}
	sr := &snapReader{r: bufio.NewReader(r), crc: crc32.New(castagnoli)}
	return sr.readAll(tx)
}

// snapReader decodes the snapshot format while summing its bytes.
type snapReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (s *snapReader) readAll(tx *bolt.Tx) error {
	magic := make([]byte, len(boltSnapMagic))
	if err := s.full(magic); err != nil || string(magic) != boltSnapMagic {
		return fmt.Errorf("%w: missing header", ErrBadSnapshot)
	}
	for {
		op, err := s.byte()
		if err != nil {
			return err
		}
		switch op {
		case 'B':
			if err := s.readBucket(tx.CreateBucket, 1); err != nil {
				return err
			}
		case 'Z':
			return s.trailer()
		default:
			return fmt.Errorf("%w: unexpected record %q at top level", ErrBadSnapshot, op)
		}
	}
}

// readBucket reads one bucket's name, sequence and body (after its 'B').
func (s *snapReader) readBucket(create func([]byte) (*bolt.Bucket, error), depth int) error {
	if depth > maxSnapDepth {
		return fmt.Errorf("%w: buckets nested too deep", ErrBadSnapshot)
	}
	name, err := s.bytes(maxSnapKey)
	if err != nil {
		return err
	}
	seq, err := binary.ReadUvarint(s)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	b, err := create(name)
	if err != nil {
		return fmt.Errorf("%w: bucket %q: %v", ErrBadSnapshot, name, err)
	}
	if err := b.SetSequence(seq); err != nil {
		return err
	}
	return s.readBody(b, depth)
}

func (s *snapReader) readBody(b *bolt.Bucket, depth int) error {
	for {
		op, err := s.byte()
		if err != nil {
			return err
		}
		switch op {
		case 'E':
			return nil
		case 'B':
			if err := s.readBucket(b.CreateBucket, depth+1); err != nil {
				return err
			}
		case 'K':
			if err := s.readKey(b); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: unexpected record %q", ErrBadSnapshot, op)
		}
	}
}

func (s *snapReader) readKey(b *bolt.Bucket) error {
	k, err := s.bytes(maxSnapKey)
	if err != nil {
		return err
	}
	v, err := s.bytes(maxSnapValue)
	if err != nil {
		return err
	}
	if len(k) == 0 {
		return fmt.Errorf("%w: empty key", ErrBadSnapshot)
	}
	return b.Put(k, v)
}

func (s *snapReader) trailer() error {
	want := s.crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(s.r, sum[:]); err != nil {
		return fmt.Errorf("%w: missing checksum", ErrBadSnapshot)
	}
	if binary.BigEndian.Uint32(sum[:]) != want {
		return fmt.Errorf("%w: checksum mismatch", ErrBadSnapshot)
	}
	return nil
}

// ReadByte lets binary.ReadUvarint read through the checksum.
func (s *snapReader) ReadByte() (byte, error) {
	c, err := s.r.ReadByte()
	if err != nil {
		return 0, err
	}
	s.crc.Write([]byte{c})
	return c, nil
}

func (s *snapReader) byte() (byte, error) {
	c, err := s.ReadByte()
	if err != nil {
		return 0, fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
	}
	return c, nil
}

func (s *snapReader) full(p []byte) error {
	if _, err := io.ReadFull(s.r, p); err != nil {
		return fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
	}
	s.crc.Write(p)
	return nil
}

func (s *snapReader) bytes(limit uint64) ([]byte, error) {
	n, err := binary.ReadUvarint(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if n > limit {
		return nil, fmt.Errorf("%w: length %d over limit %d", ErrBadSnapshot, n, limit)
	}
	p := make([]byte, n)
	return p, s.full(p)
}

// SnapshotBoltToFile writes a snapshot of db into a temporary file in dir
// and returns it positioned at the start; closing it removes the file. index
// is called inside the same read transaction to report the applied index
// the snapshot reflects.
func SnapshotBoltToFile(db *bolt.DB, dir string, index func(*bolt.Tx) uint64) (io.ReadCloser, uint64, error) {
	f, err := os.CreateTemp(dir, "snapshot-*.tmp")
	if err != nil {
		return nil, 0, err
	}
	rc := &tempFile{File: f}
	var applied uint64
	err = db.View(func(tx *bolt.Tx) error {
		applied = index(tx)
		return WriteBoltSnapshot(tx, f)
	})
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		rc.Close()
		return nil, 0, err
	}
	return rc, applied, nil
}

// tempFile removes itself when closed.
type tempFile struct{ *os.File }

func (t *tempFile) Close() error {
	err := t.File.Close()
	if rmErr := os.Remove(t.Name()); err == nil {
		err = rmErr
	}
	return err
}
